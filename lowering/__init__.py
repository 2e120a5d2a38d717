"""tvms.lowering: the build driver (build.py) and the target table (targets.py), the pass
infrastructure (transform, instrument, pass_registry), Relax passes (relax/), schedules
(schedule/, dlight/), TIR lowering (tir/) and code generation (codegen/)."""
