"""Assertions shared by the round-trip property tests: they fail with the printed text, the
first structural difference and the expected text side by side."""
from __future__ import annotations

from tvms import ScriptError
from tvms.ir import first_mismatch
from tvms.script import from_source


def roundtrip(node, dialect: str):
    """(the printed text, the IR parsed back from it)."""
    text = node.script(dialect=dialect)
    try:
        return text, from_source(text)
    except ScriptError as e:
        raise AssertionError(f"the printed {dialect} text does not parse:\n{e}\n--- text:\n{text}") from None


def assert_same_ir(expected, actual, text: str) -> None:
    found = first_mismatch(expected, actual)
    if found is not None:
        path, lhs, rhs = found
        raise AssertionError(f"the parsed IR differs at {path or '<root>'}:\n  printed: {lhs!r}\n"
                             f"  parsed:  {rhs!r}\n--- text:\n{text}")


def assert_same_text(expected: str, actual: str, what: str) -> None:
    assert actual == expected, f"{what}\n--- expected:\n{expected}\n--- got:\n{actual}"
