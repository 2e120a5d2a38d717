"""tvms.lowering: passes, schedules and code generators (later issues)."""
