"""The corpus files copied into tests/fixtures/corpus are still those of ../shared/corpus."""
from __future__ import annotations

import pytest

from conftest import CORPUS, CORPUS_COPY

COPIES = sorted(p.name for p in CORPUS_COPY.glob("*.tvms"))


@pytest.mark.skipif(not CORPUS.exists(), reason="../shared/corpus is not beside the checkout")
@pytest.mark.parametrize("name", COPIES)
def test_copy_equals_the_corpus_file(name: str) -> None:
    assert (CORPUS_COPY / name).read_bytes() == (CORPUS / name).read_bytes()
