"""tvms.lowering: the pass infrastructure (transform, instrument, pass_registry), Relax visitors
(relax/); schedules and code generators come with later issues."""
