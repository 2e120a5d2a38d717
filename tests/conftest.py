"""Shared test configuration: where the corpus and fixtures live, and the --runslow switch."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import tempfile
from types import ModuleType

import pytest

import tvms
from tvms.ir.registry import load_layers
from tvms.ir.relax_op import load_tables

# ``import tvms`` leaves its parts for first use (tests/test_lazy_import.py checks that in fresh
# processes). Here they all load first, as before: a test that saves and restores a registry
# (passes, global functions, Relax operators) must not drop what a part registers while it runs.
load_layers()
load_tables()

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
# The corpus files that single tests read, copied from ../shared/corpus so that a plain clone runs
# them; only the tests over the whole corpus (corpus_manifest) skip without ../shared.
# tests/test_corpus_copies.py checks that the copies still equal the corpus.
CORPUS_COPY = FIXTURES / "corpus"


def load_example(filename: str) -> ModuleType:
    """A Python file of ``examples/``, imported as a module (the examples are not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{pathlib.Path(filename).stem}",
                                                  ROOT / "examples" / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def corpus_manifest() -> list[dict]:
    """The corpus manifest rows (empty when ../shared is not beside the checkout)."""
    path = CORPUS / "manifest.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False, help="run tests marked slow")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a long test, run with --runslow")
    # compiled kernels are cached on disk (lowering/codegen/object_cache.py): the tests use a
    # cache of their own, so they neither fill the user's ~/.cache/tvms nor read kernels from it
    if "TVMS_CACHE_DIR" not in os.environ:
        config._tvms_cache = tempfile.mkdtemp(prefix="tvms-test-cache-")
        os.environ["TVMS_CACHE_DIR"] = config._tvms_cache


def pytest_unconfigure(config: pytest.Config) -> None:
    cache = getattr(config, "_tvms_cache", None)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        os.environ.pop("TVMS_CACHE_DIR", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# Hypothesis profiles. `ci` (the default, `make test`) draws the same examples on every run, so a
# newly drawn example never fails a submission; `fuzz` (`make test-all`, `make fuzz`) draws fresh
# ones and keeps failures in .hypothesis/ to replay. The deadline is generous: two shared cores
# are slow, and a timing failure there says nothing about the code.
# `pytest --hypothesis-profile=noshrink` shows a failing example at once (no shrinking): useful
# while debugging a property, not for CI, where the shrunk example is the helpful one.
from datetime import timedelta  # noqa: E402

from hypothesis import Phase, settings  # noqa: E402

settings.register_profile("ci", derandomize=True, database=None, print_blob=True,
                          deadline=timedelta(seconds=5))
settings.register_profile("fuzz", derandomize=False, print_blob=True, deadline=timedelta(seconds=5))
settings.register_profile("noshrink", phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile("ci")  # `--hypothesis-profile=NAME` replaces it
