"""tvms.lowering.relax: Relax passes and the Python visitors they are written with."""
