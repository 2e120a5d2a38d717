"""Auto-tuning (``tvms.meta_schedule``): search over the stochastic schedules of a PrimFunc.

The pieces carry TVM's names and meet at a few small records: a ``TuneContext`` (the task: a
module, a target, a space, a strategy), ``MeasureCandidate`` (a schedule to try), the builder's and
runner's inputs and results (``measure.py``), and the tuning records kept by a ``Database``.
"""
