"""A PrimFunc's signature as data (ir/signature.py): what an exported library keeps of a kernel."""
from __future__ import annotations

import pytest

from tvms import TVMSError
from tvms.ir.node import FrozenDict
from tvms.ir.signature import signature_json, signature_of
from tvms.ir.structural import structural_equal
from tvms.script import from_source

SOURCE = '''
@T.prim_func
def f(a: T.handle, b: T.handle, alpha: T.float32):
    n = T.int64()
    A = T.match_buffer(a, (n, 4), strides=(4, 1))
    B = T.match_buffer(b, (n * 2 // 3 + 1,), "int8")
    T.evaluate(0)
'''


def test_round_trip_keeps_params_buffers_and_sizes() -> None:
    func = from_source(SOURCE)
    back = signature_of(signature_json(func), "f")
    assert structural_equal(back, func.with_changes(attrs=FrozenDict()))  # (the body is T.evaluate(0))
    a, b = (back.buffer_map[p] for p in back.params[:2])
    assert a.shape[0] is b.shape[0].a.a.a  # one variable n, shared by both buffers


@pytest.mark.parametrize("data, message", [
    ({}, "KeyError"),
    ({"params": [{"name": "a", "dtype": "handle", "buffer": {"shape": []}}]}, "malformed"),
    ({"params": [{"name": 3, "dtype": "int32"}]}, "variable name"),
])
def test_malformed_signatures_are_refused(data: dict, message: str) -> None:
    with pytest.raises(TVMSError, match=message):
        signature_of(data, "f")


def test_unknown_size_operator_is_refused() -> None:
    data = signature_json(from_source(SOURCE))
    data["params"][1]["buffer"]["shape"] = [["pow", ["int", 2, "int64"], ["int", 3, "int64"]]]
    with pytest.raises(TVMSError, match="unknown size operator 'pow'"):
        signature_of(data, "f")
