"""Golden round-trips: the TensorIR files of ../shared/corpus (printed by Apache TVM 0.27) and
the seeds' printed modules (classic dialect) print back byte for byte."""
from __future__ import annotations

import pytest

from conftest import CORPUS, CORPUS_COPY, FIXTURES, corpus_manifest
from tvms.ir import first_mismatch
from tvms.script import from_source

# Every TVMScript file of the corpus, including those Apache TVM itself does not round-trip
# (tvm_roundtrip false in the manifest: GPU lowering output, tuples, constants).
SCRIPT_FILES = [row["file"] for row in corpus_manifest() if row["kind"] != "trace"]
@pytest.mark.skipif(not SCRIPT_FILES, reason="../shared/corpus is not present")
@pytest.mark.parametrize("name", SCRIPT_FILES)
def test_corpus_roundtrips_exactly(name: str) -> None:
    text = (CORPUS / name).read_text()
    mod = from_source(text, name)
    assert mod.script(dialect="tvm-0.27") == text
    assert first_mismatch(mod, from_source(text)) is None


CLASSIC_FIXTURES = sorted((FIXTURES / "seeds" / "classic").glob("*.tvms")) + sorted(
    (FIXTURES / "seeds_relax").glob("*.tvms"))



@pytest.mark.parametrize("path", CLASSIC_FIXTURES, ids=lambda p: p.name)
def test_seed_modules_roundtrip_in_the_classic_dialect(path) -> None:
    text = path.read_text()
    assert from_source(text, path.name).script() == text


LEGACY = sorted((FIXTURES / "seeds" / "legacy").glob("*.tvms")) + sorted(
    (FIXTURES / "seeds" / "input").glob("*.tvms")) + sorted((FIXTURES / "seeds_relax" / "input").glob("*.tvms"))


@pytest.mark.parametrize("path", LEGACY, ids=lambda p: p.name)
def test_older_syntax_parses_and_prints_canonically(path) -> None:
    """Seed 002's older printer output and hand-written inputs parse; their canonical text is a
    fixpoint in both dialects and the two dialects describe the same IR."""
    mod = from_source(path.read_text(), path.name)
    for dialect in ("classic", "tvm-0.27"):
        text = mod.script(dialect=dialect)
        again = from_source(text)
        assert again.script(dialect=dialect) == text
        assert first_mismatch(mod, again) is None


def test_cross_dialect_conversion_keeps_the_ir() -> None:
    text = (CORPUS_COPY / "sched_reduce_sum_rfactor.tvms").read_text()
    mod = from_source(text)
    classic = mod.script(dialect="classic")
    assert "T.block(" in classic and "T.sblock" not in classic
    assert "T.alloc_buffer((128, 32))" in classic
    back = from_source(classic).script(dialect="tvm-0.27")
    assert back == text
