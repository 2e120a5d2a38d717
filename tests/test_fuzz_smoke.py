"""A 2,000-input smoke run of the fuzzer (benchmarks/fuzz.py), in this process: every mutated
input is handled or refused with a TVMSError. ``make fuzz`` runs the long version."""
from __future__ import annotations

import importlib.util
import sys

from conftest import ROOT


def load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz", ROOT / "benchmarks" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_two_thousand_mutated_inputs_escape_nothing() -> None:
    fuzz = load_fuzzer()
    # Every input is formatted; a sample is optimized, scheduled and built (the slow stages).
    # Nesting stays at most 20 deep: deeper inputs are the subject of issue 12's point 5.
    config = fuzz.Config(seed=1, stages=fuzz.STAGES, rates={"opt": 0.01, "schedule": 0.05, "build": 0.001},
                         generated=10, max_depth=20)
    report = fuzz.fuzz(2000, config)
    assert report.escaped == 0, "\n".join(f"{n} x {sig} (input #{report.examples[sig]})"
                                         for sig, n in report.escapes.most_common())
    # the mutations leave many inputs whole enough to get past the parser
    assert report.counts["ok"] > 100 and report.counts["refused"] > 1000
