"""String tensors: dtype ``string`` through from_onnx, the printer and parser, the VM, a built
library and the CLI; the string operators' ONNX semantics; RE2 patterns (``ir/re2.py``) read as
RE2 reads them, refused where this matcher would read them otherwise, in linear time."""
from __future__ import annotations

import base64
import re
import struct

import numpy as np
import pytest

import tvms
from tvms import relax
from tvms.ir.errors import TVMSError
from tvms.ir.re2 import PatternError, compile_pattern
from tvms.ir.vm_program import MAGIC, VERSION, Ret, VMFunction, VMProgram, deserialize, serialize
from tvms.runtime import string_ops
from tvms.script import from_source
from tvms.script.metadata import decode_entry

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from tvms.cli import main  # noqa: E402
from tvms.relax.frontend.onnx import from_onnx  # noqa: E402


@pytest.mark.parametrize("pattern,text,expected", [
    (r"a$\n", "a\n", False),  # ($ is the end of the text, not before a last newline as in Python)
    (r"(?m)a$\n", "a\n", True),
    (r"a{,3}", "a{,3}", True),  # (literal in RE2; Python reads a repeat of 0 to 3)
    (r"a{,3}", "aa", False),
    (r"\s", "\v", False),  # (RE2's \s: tab, newline, form feed, carriage return, space)
    (r"\w+", "héllo", False),  # (ASCII word characters)
    (r"\bé", "é", False),
    (r"[\d_]+x{2,3}", "1_2xxx", True),
    (r"(?s:.)\.", "\n.", True),
    (r".", "\n", False),
    (r"\Qa.b\E+", "a.bbb", True),
    (r"\x41\x{1F600}", "A\U0001F600", True),
    (r"(?P<w>ab|a)(c|bcd)", "abcd", True),
    (r"", "", True),
    (r"(?:a|b)+", "abba", True),  # (RE2's non-capturing group)
    (r"(?)a", "a", True),  # (an empty flag group sets nothing)
    (r"[a-cb-d]+[\d-]", "dcab-", True),  # (overlapping ranges merged; '-' after a class is literal)
    (r"(a{10}){100}", "a" * 1000, True),  # (nested counts multiplying to RE2's bound of 1000)
])
def test_re2_full_match_semantics(pattern, text, expected):
    assert compile_pattern(pattern)(text) is expected


def test_re2_agrees_with_python_where_the_syntaxes_agree():
    rng = np.random.default_rng(0)
    atoms = ["a", "b", "[ab]", ".", "(a|b)", "(ab|a)", r"\d", r"\w", "x", "[^a]"]
    for _ in range(300):
        pattern = "".join(rng.choice(atoms) + rng.choice(["", "*", "+", "?", "{1,2}", "*?"])
                          for _ in range(rng.integers(1, 5)))
        for _ in range(4):
            text = "".join(rng.choice(list("abx1 "), rng.integers(0, 7)))
            assert compile_pattern(pattern)(text) == bool(re.fullmatch(pattern, text, re.ASCII)), (pattern, text)


def test_re2_has_no_catastrophic_backtracking():
    # exponential for a backtracking matcher; here length x states steps
    assert compile_pattern(r"(a|aa)*(a*)*c")("a" * 2000) is False
    assert compile_pattern(r"(x+x+)+y")("x" * 2000 + "y") is True


@pytest.mark.parametrize("pattern,message", [
    (r"(a)\1", "RE2 has no backreferences"),
    (r"a(?=b)", "RE2 has no lookahead"),
    (r"(?<!a)b", "RE2 has no negative lookbehind"),
    (r"(?>a)", "RE2 has no atomic groups"),
    (r"a*+", "possessive"),
    (r"(?i)a", "case-insensitive"),
    (r"\pL", "Unicode classes"),
    (r"[[:alpha:]]", "POSIX classes"),
    (r"a{1001}", "RE2 allows 0 to 1000"),
    (r"\Z", r"RE2 writes the end of text \\z"),
    (r"(a", "unexpected end"),
    (r"*", "a repeat of nothing"),
    (r"\x{41", "missing '}'"),  # (once re-read the pattern from its start forever)
    (r"(?-)", "a bad flag group"),
    (r"(?s-:a)", "a bad flag group"),
    # each would cost thousands of automaton steps per character: RE2 refuses nested counts
    # multiplying past 1000, and the automaton's states plus class ranges are bounded
    (r"([a-z]{0,999}){0,4}", "nested repeat counts multiply past 1000"),
    (r"(a{100}){200}", "nested repeat counts multiply past 1000"),
    ("[" + "".join(chr(0x100 + 2 * k) for k in range(20_000)) + "]", "too large"),
    (r"(abcdefghijk){1000}", "too large"),
    ("(" * 101 + ")" * 101, "groups nested more than 100 deep"),
    (r"[0-\d]", r"a bad range in \[...\]"),
    (r"\€", "RE2 escapes only ASCII punctuation"),
    (r"(?P<n>a)(?P<n>b)", "a duplicate group name 'n'"),
])
def test_re2_refusals(pattern, message):
    with pytest.raises(PatternError, match=message):
        compile_pattern(pattern)


def _text_model():
    """Split on '-', look each string up, match a pattern, and upper-case what is not a stop word."""
    n = helper.make_node
    graph = helper.make_graph(
        [n("StringSplit", ["x"], ["parts", "count"], delimiter="-", maxsplit=1),
         n("LabelEncoder", ["x"], ["code"], domain="ai.onnx.ml", keys_strings=["a-b", "c"], values_int64s=[7, 8]),
         n("LabelEncoder", ["code"], ["name"], domain="ai.onnx.ml", keys_int64s=[7], values_strings=["seven"],
           default_string="other"),
         n("RegexFullMatch", ["x"], ["matched"], pattern=r"[a-c](-b)?"),
         n("StringNormalizer", ["x"], ["kept"], case_change_action="UPPER", stopwords=["C"]),
         n("StringConcat", ["name", "x"], ["joined"])],
        "text", [helper.make_tensor_value_info("x", TensorProto.STRING, [3])],
        [helper.make_tensor_value_info(v, t, None) for v, t in
         [("parts", TensorProto.STRING), ("count", TensorProto.INT64), ("name", TensorProto.STRING),
          ("matched", TensorProto.BOOL), ("kept", TensorProto.STRING), ("joined", TensorProto.STRING)]])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ai.onnx.ml", 4)])


EXPECTED = [np.array([["a", "b"], ["c", ""], ["x", "y-z"]], object), np.array([2, 1, 2]),
            np.array(["seven", "other", "other"], object), np.array([True, True, False]),
            np.array(["A-B", "X-Y-Z"], object), np.array(["sevena-b", "otherc", "otherx-y-z"], object)]


def _check(outputs):
    for out, want in zip(outputs, EXPECTED):
        assert out.dtype == ("string" if want.dtype == object else str(want.dtype))
        np.testing.assert_array_equal(out.numpy(), want)


def test_string_model_prints_parses_and_runs(tmp_path):
    mod = from_onnx(_text_model())
    text = mod.script(show_meta=True)
    assert 'x: R.Tensor((3,), dtype="string")' in text and '"dtype": "string"' in text
    again = from_source(text)
    assert again.script(show_meta=True) == text
    x = tvms.nd.array(np.array(["a-b", "c", "x-y-z"]))
    run = relax.VirtualMachine(tvms.compile(again, "llvm"), tvms.cpu())["main"]
    _check(run(x))
    _check(run(np.array(["a-b", "c", "x-y-z"])))  # (numpy text: a string tensor's argument too)
    # a built library keeps the string constants (LabelEncoder's tables)
    tvms.compile(mod, "llvm").export_library(str(tmp_path / "text.so"))
    loaded = tvms.runtime.load_module(str(tmp_path / "text.so"))
    _check(relax.VirtualMachine(loaded, tvms.cpu())["main"](x))


def test_cli_runs_a_string_model_on_text_npy(tmp_path, capsys):
    onnx.save(_text_model(), str(tmp_path / "text.onnx"))
    assert main(["import", str(tmp_path / "text.onnx"), "-o", str(tmp_path / "text.tvms")]) == 0
    np.save(tmp_path / "x.npy", np.array(["a-b", "c", "x-y-z"]))  # (<U5: read without a pickle)
    capsys.readouterr()
    assert main(["run", str(tmp_path / "text.tvms"), "--input", f"x={tmp_path / 'x.npy'}"]) == 0
    out = capsys.readouterr().out
    assert "output[5]: shape (3,) string" in out and "'sevena-b', 'otherc', 'otherx-y-z'" in out
    assert main(["run", str(tmp_path / "text.tvms"), "--random-inputs"]) == 0


def _one_node(node, shape=(3,), opset=20):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.STRING, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("node,shape,message", [
    (helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"(a)\1"), (3,), "RE2 has no backreferences"),
    (helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(" * 300 + ")" * 300), (3,), "nested more than 100"),
    (helper.make_node("StringNormalizer", ["x"], ["y"], locale="tr_TR", case_change_action="UPPER"), (3,),
     "the locale 'tr_TR'"),
    (helper.make_node("StringNormalizer", ["x"], ["y"]), (2, 3), r"ONNX takes \[C\] or \[1, C\]"),
    (helper.make_node("Relu", ["x"], ["y"]), (3,), "string tensors are not supported as inputs of Relu"),
])
def test_string_forms_refused_at_import(node, shape, message):
    with pytest.raises(TVMSError, match=message):
        from_onnx(_one_node(node, shape))


def test_string_normalizer_semantics():
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER", stopwords=["MONDAY"])
    vm = relax.VirtualMachine(tvms.compile(from_onnx(_one_node(node, (1, 4))), "llvm"), tvms.cpu())
    out = vm["main"](tvms.nd.array(np.array([["Monday", "ÉTÉ", "monday", "x y"]])))
    np.testing.assert_array_equal(out.numpy(), np.array([["été", "x y"]], object))  # (case-insensitive stop words)
    out = vm["main"](tvms.nd.array(np.array([["monday"] * 4])))
    np.testing.assert_array_equal(out.numpy(), np.array([[""]], object))  # (all dropped: one "" stays)
    with pytest.raises(TVMSError, match="holds str elements, not NoneType"):  # (an object array argument)
        vm["main"](np.array([["a", None, "b", "c"]], object))
    with pytest.raises(TVMSError, match="expected a case change of LOWER/UPPER/NONE"):  # (as a hand-written
        string_ops.normalize(np.array(["a"], object), "TITLE", 0)  # .tvms may call it)


def test_string_constants_nested_too_deep_for_json_are_refused():
    deep = b"[" * 100_000  # (json.loads raises RecursionError on it)
    with pytest.raises(TVMSError, match=r"a string metadata constant of shape \[1\] is not a JSON list of 1 strings"):
        decode_entry({"dtype": "string", "shape": [1], "data": base64.b64encode(deep).decode()})
    ret = VMFunction("f", ("x",), 1, (), (Ret(0),))
    data = serialize(VMProgram((ret,), (np.array([" " * (len(deep) - 4)], object),)))
    assert deserialize(data).constants[0][0] == " " * (len(deep) - 4)
    with pytest.raises(TVMSError, match="a string constant of shape"):
        deserialize(data[:-len(deep)] + deep)  # (the constant's JSON list)
    with pytest.raises(TVMSError, match="malformed VM program: RecursionError"):
        deserialize(MAGIC + struct.pack("<IQ", VERSION, len(deep)) + deep)  # (the header)


def test_string_constants_shape_size_and_equal_either_way():
    n = helper.make_node
    graph = helper.make_graph(
        [n("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.STRING, [2], [b"a", b"x"])),
         n("Constant", [], ["d"], value_strings=["a", "y"]), n("Constant", [], ["e"], value_string="a"),
         n("Equal", ["c", "x"], ["eq"]), n("Equal", ["d", "x"], ["eq2"]), n("Equal", ["x", "e"], ["eq3"]),
         n("Shape", ["x"], ["s"]), n("Size", ["x"], ["z"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info(v, TensorProto.UNDEFINED, None) for v in ("eq", "eq2", "eq3", "s", "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    out = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())["main"](np.array(["a", "y"]))
    for got, want in zip(out, [[True, False], [True, True], [True, False], [2], 2]):
        np.testing.assert_array_equal(got.numpy(), want)
    # a string second input decides too (an int64 first one is refused at import, not by LegalizeOps)
    graph = helper.make_graph([n("Equal", ["i", "x"], ["eq"])], "g",
                              [helper.make_tensor_value_info("i", TensorProto.INT64, [2]), graph.input[0]],
                              [helper.make_tensor_value_info("eq", TensorProto.BOOL, None)])
    with pytest.raises(TVMSError, match="the input must be a string tensor, not int64"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
