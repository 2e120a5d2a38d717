"""relax.BlockBuilder, programmatic Relax (seed 004), the relax.op namespace and the IRModule API
the seeds use. Golden texts are what Apache TVM 0.27 prints for the same constructions
(tests/fixtures/relax_builder/README.md)."""
from __future__ import annotations

import pytest
from conftest import FIXTURES

import tvms as tvm
from tvms import relax
from tvms.ir import DataType, Mutator, Op, first_mismatch, structural_equal
from tvms.ir import relax_op
from tvms.ir.relax_infer import infer_unary
from tvms.script import from_source

GOLDEN = FIXTURES / "relax_builder"
TS = relax.TensorStructInfo


def golden(name: str) -> str:
    return (GOLDEN / f"{name}.tvms").read_text()


def size(name: str) -> tvm.ir.Var:
    return tvm.ir.Var(name, DataType("int64"))


def assert_roundtrip(mod: tvm.IRModule) -> None:
    """parse(print(mod)) is structurally equal to mod, in both dialects. A module with nested
    calls reads back in normal form (the parser binds them first, as TVM's does), and that
    module's text is a fixpoint."""
    for dialect in ("classic", "tvm-0.27"):
        back = from_source(mod.script(dialect=dialect))
        if _has_nested_calls(mod):
            assert not _has_nested_calls(back)
            mod, back = back, from_source(back.script(dialect=dialect))
        assert structural_equal(mod, back), (dialect, first_mismatch(mod, back))


def _has_nested_calls(mod: tvm.IRModule) -> bool:
    """Whether a call has a nested call (or a function returns one) as an operand."""
    from tvms.ir.visitor import collect

    def nested(a: object) -> bool:
        return isinstance(a, (relax.Call, relax.TupleGetItem, relax.If)) or \
            isinstance(a, relax.Tuple) and any(nested(f) for f in a.fields)

    funcs = [f for _, f in mod.functions_items() if isinstance(f, relax.Function)]
    return any(nested(a) for f in funcs for call in collect(f, relax.Call) for a in call.args) or \
        any(nested(f.body.body if isinstance(f.body, relax.SeqExpr) else f.body) for f in funcs)


def mlp_vars() -> tuple:
    return (relax.Var("x", TS([1, 784], "float32")), relax.Var("w1", TS([256, 784], "float32")),
            relax.Var("b1", TS([256], "float32")), relax.Var("w2", TS([10, 256], "float32")),
            relax.Var("b2", TS([10], "float32")))


def seed004_function() -> relax.Function:
    """Seed 004's example, as written there."""
    x, w1, b1, w2, b2 = mlp_vars()
    hidden = relax.op.add(relax.op.matmul(x, relax.op.permute_dims(w1)), b1)
    hidden = relax.op.nn.relu(hidden)
    output = relax.op.add(relax.op.matmul(hidden, relax.op.permute_dims(w2)), b2)
    return relax.Function([x, w1, b1, w2, b2], output,
                          ret_struct_info=relax.TensorStructInfo([1, 10], "float32"))


# ---------------------------------------------------------------- programmatic Relax (seed 004)
def test_seed004_function_prints_as_tvm() -> None:
    mod = tvm.IRModule.from_expr(seed004_function())
    assert mod.script(dialect="tvm-0.27") == golden("seed004_function")
    classic = mod.script()
    assert classic == golden("seed004_function").replace("out_dtype=None", 'out_dtype="void"')
    assert "return R.add(R.matmul(R.nn.relu(R.add(R.matmul(x, R.permute_dims(w1, axes=None)" in classic
    assert_roundtrip(mod)


def test_seed004_function_structure() -> None:
    func = seed004_function()
    mod = tvm.IRModule.from_expr(func)
    assert [gv.name_hint for gv, _ in mod.functions_items()] == ["main"]
    assert mod["main"] is func and func.is_private  # no global_symbol: printed private=True
    assert isinstance(func.body, relax.SeqExpr) and func.body.blocks == ()  # not normalized
    assert isinstance(func.body.body, relax.Call) and func.body.body.op.name == "relax.add"
    assert [p.name for p in func.params] == ["x", "w1", "b1", "w2", "b2"]
    assert isinstance(func.struct_info, relax.FuncStructInfo)
    assert func.struct_info.params == tuple(p.struct_info for p in func.params)
    relu = func.body.body.args[0].args[0]  # add(matmul(relu(...), ...), b2): inferred eagerly
    assert relu.op.name == "relax.nn.relu" and [d.value for d in relu.struct_info.dims] == [1, 256]
    assert [d.value for d in func.body.body.struct_info.dims] == [1, 10]


def test_function_derives_its_return_struct_info() -> None:
    x, w1, b1, _, _ = mlp_vars()
    func = relax.Function([x, w1], relax.op.matmul(x, relax.op.permute_dims(w1)))
    assert [d.value for d in func.ret_struct_info.dims] == [1, 256]
    assert func.with_attr("global_symbol", "f").attrs["global_symbol"] == "f"


def test_normalize_binds_nested_calls() -> None:
    normalized = relax.BlockBuilder().normalize(seed004_function())
    mod = tvm.IRModule({"main": normalized})
    assert mod.script(dialect="tvm-0.27") == golden("seed004_normalized")
    assert [b.var.name for b in normalized.body.blocks[0].bindings] == [f"gv{i or ''}" for i in range(7)]
    assert_roundtrip(mod)


# ---------------------------------------------------------------- BlockBuilder
def test_builder_mlp_with_dataflow() -> None:
    x, w1, b1, w2, b2 = mlp_vars()
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w1, b1, w2, b2]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.add(relax.op.matmul(x, relax.op.permute_dims(w1)), b1))
            lv1 = bb.emit(relax.op.nn.relu(lv0))
            lv2 = bb.emit(relax.op.matmul(lv1, relax.op.permute_dims(w2)), name_hint="mm")
            lv3 = bb.emit(relax.op.add(lv2, b2))
            gv = bb.emit_output(lv3)
        bb.emit_func_output(gv)
    mod = bb.get()
    assert mod.script(dialect="tvm-0.27") == golden("seed004_builder_mlp")
    assert isinstance(lv0, relax.DataflowVar) and lv0.name == "lv2"  # nested calls took lv, lv1
    assert type(gv) is relax.Var and gv.name == "gv"
    (block,) = mod["main"].body.blocks
    assert isinstance(block, relax.DataflowBlock) and len(block.bindings) == 8
    assert mod["main"].attrs["global_symbol"] == "main"
    assert_roundtrip(mod)


def test_builder_functions_private_attrs_tuples() -> None:
    x, w1, *_ = mlp_vars()
    bb = relax.BlockBuilder()
    with bb.function("f", [x, w1], attrs={"num_input": 1}, private=True):
        a = bb.emit(relax.op.matmul(x, relax.op.permute_dims(w1)))
        b = bb.emit(relax.op.nn.relu(a))
        bb.emit_func_output(b)
    with bb.function("g", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.relu(x))
            c = bb.emit_output(relax.Tuple([a, a]))
            d = bb.emit_output(a)
        gv = bb.emit_func_output(relax.Tuple([c, d]))
    mod = bb.get()
    assert mod.script(dialect="tvm-0.27") == golden("functions_private_tuples")
    assert gv is mod.get_global_var("g")
    assert mod["f"].is_private and dict(mod["f"].attrs) == {"num_input": 1}
    assert isinstance(mod["g"].ret_struct_info, relax.TupleStructInfo)
    assert_roundtrip(mod)


def test_builder_names_memo_and_symbolic_sizes() -> None:
    n = size("n")
    x = relax.Var("x", TS([n, 4], "float32"))
    y = relax.Var("y", TS([4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        a = bb.emit(relax.op.add(x, y), name_hint="main")  # takes the name "main" first
        c = relax.op.nn.relu(a)
        d = bb.emit(relax.op.add(c, c), name_hint="lv.x")  # the same call object is bound once
        e = bb.emit(relax.Tuple([relax.op.nn.relu(d), d]))
        f = bb.emit(relax.TupleGetItem(e, 0))
        bb.emit_func_output(relax.op.add(d, relax.op.nn.relu(f)))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.relu(x), name_hint="main")
            b = bb.emit_output(relax.op.nn.relu(relax.op.nn.relu(a)))
        bb.emit_func_output(b)
    mod = bb.get()
    assert mod.script(dialect="tvm-0.27") == golden("names_memo_symbolic")
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["main1", "main3"]
    assert mod["main1"].attrs["global_symbol"] == "main"
    assert mod["main1"].ret_struct_info.dims[0] is n
    assert_roundtrip(mod)


def match_cast_module() -> tuple:
    y = relax.Var("y", TS(ndim=2, dtype="float32"))
    m, k = size("m"), size("k")
    bb = relax.BlockBuilder()
    with bb.function("main", [y]):
        with bb.dataflow():
            a = bb.match_cast(y, TS([m, k], "float32"))
            b = bb.emit_output(relax.op.nn.relu(a))
        bb.emit_func_output(b)
    return bb.get(), m, k


def test_match_cast_and_return_erasure() -> None:
    mod, m, k = match_cast_module()
    func = mod["main"]
    (block,) = func.body.blocks
    cast = block.bindings[0]
    assert isinstance(cast, relax.MatchCast) and cast.var.name == "lv"
    assert list(cast.var.struct_info.dims) == [m, k]
    # m and k are not defined by the parameters: the return struct info forgets them, as in TVM
    ret = func.ret_struct_info
    assert ret.shape is None and ret.ndim == 2 and str(ret.dtype) == "float32"
    assert list(func.body.struct_info.dims) == [m, k]  # the body keeps them
    classic = mod.script()
    assert "        m = T.int64()\n        k = T.int64()\n        with R.dataflow():" in classic
    back = from_source(classic)
    assert structural_equal(mod, back), first_mismatch(mod, back)


def test_match_cast_prints_as_tvm() -> None:
    mod, _, _ = match_cast_module()
    assert mod.script(dialect="tvm-0.27") == golden("match_cast_erasure")


def test_params_given_at_the_end_update_func_and_dedup() -> None:
    x = relax.Var("x", TS([2, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("h"):
        gv = bb.emit_func_output(relax.op.nn.relu(relax.op.exp(x)), params=[x])
    assert [b.var.name for b in bb.get()["h"].body.blocks[0].bindings] == ["gv", "gv1"]
    x2 = relax.Var("x", TS([2, 3], "float32"))
    new = relax.Function([x2], relax.op.sigmoid(x2), ret_struct_info=TS([2, 3], "float32"))
    bb.update_func(gv, new)
    assert bb.add_func(new, "h") is gv  # an equal function is not added twice
    mod = bb.get()
    assert mod.script(dialect="tvm-0.27") == golden("update_add_func")
    assert_roundtrip(mod)


def test_finalize_names_public_functions_by_global_symbol() -> None:
    x = relax.Var("x", TS([2], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("g", [x], private=True):
        bb.emit_func_output(bb.emit(relax.op.nn.relu(x), name_hint="f"))  # the name f is taken
    with bb.function("f", [x]):
        a = bb.emit(relax.op.nn.relu(x))
        bb.emit_func_output(bb.emit(relax.Call(bb.get().get_global_var("g"), [a])))
    assert [gv.name_hint for gv in bb.get().get_global_vars()] == ["g", "f1"]
    mod = bb.finalize()
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["g", "f"]
    call = mod["f"].body.blocks[0].bindings[1].value
    assert call.op is mod.get_global_var("g") and call.struct_info.dims[0].value == 2
    text = mod.script(dialect="tvm-0.27")
    # TVM prints the same two functions (it orders them by name: f first)
    assert "    @R.function\n    def f(x: R.Tensor((2,), dtype=\"float32\")) -> R.Tensor((2,), " \
        "dtype=\"float32\"):\n        cls = Module\n" in text and "func_attr" not in text
    # the parser gives `cls.g(gv)` R.Object struct info (it does not look up g's signature), so
    # the parsed module differs in that one place; its text is the same
    for dialect in ("classic", "tvm-0.27"):
        printed = mod.script(dialect=dialect)
        assert from_source(printed).script(dialect=dialect) == printed


def test_constants_shapes_and_python_tuples() -> None:
    x = relax.Var("x", TS([2, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.add(x, relax.const(1.5, "float32")))
            r = bb.emit(relax.op.reshape(a, [3, 2]))
            s = bb.emit(relax.op.reshape(a, relax.ShapeExpr([-1])))
            gv = bb.emit_output((r, s))  # a Python tuple is a relax.Tuple
        bb.emit_func_output(gv)
    mod = bb.get()
    assert mod.script(dialect="tvm-0.27") == golden("const_reshape_tuple")
    assert isinstance(mod["main"].body.blocks[0].bindings[-1].value, relax.Tuple)
    assert_roundtrip(mod)


def test_const_dtypes_follow_tvm() -> None:
    assert str(relax.const(1.0).struct_info.dtype) == "float32"
    assert str(relax.const(3).struct_info.dtype) == "int32"
    assert str(relax.const([1.0, 2.0], "float16").struct_info.dtype) == "float16"
    assert [d.value for d in relax.const([[1, 2], [3, 4]]).struct_info.dims] == [2, 2]


def test_call_tir_into_a_module_function() -> None:
    tir_mod = from_source('''# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def relu(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = T.max(A[vi], T.float32(0.0))''')
    bb = relax.BlockBuilder(tir_mod)
    x = relax.Var("x", TS([4], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.call_tir(bb.get().get_global_var("relu"), [x], TS([4], "float32")))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script()
    assert 'lv = R.call_tir(cls.relu, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))' in text
    assert list(tir_mod) == ["relu"]  # the builder works on a copy
    assert_roundtrip(mod)


def test_builder_errors() -> None:
    x = relax.Var("x", TS([2], "float32"))
    bb = relax.BlockBuilder()
    with pytest.raises(tvm.TVMSError, match="inside `with bb.function"):
        bb.emit_func_output(x)
    with pytest.raises(tvm.TVMSError, match="no open block"):
        bb.emit(relax.op.nn.relu(x))
    with pytest.raises(tvm.TVMSError, match="only allowed inside a dataflow block"):
        with bb.function("f", [x]):
            bb.emit_output(relax.op.nn.relu(x))
    with pytest.raises(tvm.TVMSError, match="emit_func_output must be called"):
        with bb.function("g", [x]):
            bb.emit(relax.op.nn.relu(x))
    with pytest.raises(tvm.TVMSError, match="exactly once"):
        with bb.function("h", [x]):
            bb.emit_func_output(x)
            bb.emit_func_output(x)
    with pytest.raises(tvm.TVMSError, match="dataflow variable 'lv'"):
        with bb.function("k", [x]):
            with bb.dataflow():
                lv = bb.emit(relax.op.nn.relu(x))
            bb.emit_func_output(lv)
    assert relax.BlockBuilder.current() is None and len(bb.get()) == 1  # only h was added


# ---------------------------------------------------------------- the IRModule API of the seeds
class ReluToGelu(Mutator):
    """Seed 003's custom pass: rewrite relax.nn.relu calls to relax.nn.gelu."""

    def visit_Call(self, call: relax.Call) -> relax.Expr:
        call = self.generic_visit(call)
        if isinstance(call.op, Op) and call.op.name == "relax.nn.relu":
            return relax.op.nn.gelu(call.args[0])
        return call


def test_seed003_relu_to_gelu_through_the_module_api() -> None:
    origin = from_source((FIXTURES / "seeds_relax" / "seed003_relax_mlp_exported.tvms").read_text())
    builder = relax.BlockBuilder(origin)
    for g_var, func in origin.functions_items():
        if isinstance(func, relax.Function):
            builder.update_func(g_var, ReluToGelu().visit(func))
    mod = builder.get()
    assert mod.script() == (FIXTURES / "seeds_relax" / "seed003_relax_relu_to_gelu.tvms").read_text()
    assert "R.nn.relu" in origin.script()  # the original module is unchanged
    assert_roundtrip(mod)


def test_module_item_access_and_update() -> None:
    mod = tvm.IRModule.from_expr(seed004_function())
    gv = mod.get_global_var("main")
    assert mod[gv] is mod["main"]
    x = relax.Var("x", TS([3], "float32"))
    other = relax.Function([x], relax.op.nn.relu(x)).with_attr("global_symbol", "main")
    mod[gv] = other
    assert mod["main"] is other and mod.get_global_var("main") is gv
    mod.update_func(gv, other.with_attr("global_symbol", "relu3"))
    assert mod["main"].attrs["global_symbol"] == "relu3"
    mod["second"] = seed004_function()
    assert [g.name_hint for g, _ in mod.functions_items()] == ["main", "second"]
    text = mod.script()
    assert 'R.func_attr({"global_symbol": "relu3"})' in text and "def second(" in text
    assert_roundtrip(mod)


# ---------------------------------------------------------------- relax.op and struct info helpers
def test_op_namespace_follows_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    names = set(dir(relax.op))
    assert {"add", "matmul", "permute_dims", "nn"} <= names
    assert {n.split(".")[1] for n in relax_op.script_names() if n.startswith("nn.")} <= set(dir(relax.op.nn))
    assert relax.op.nn.relu.__name__ == "relu"
    monkeypatch.setattr(relax_op, "_BY_NAME", dict(relax_op._BY_NAME))
    monkeypatch.setattr(relax_op, "_BY_SCRIPT", dict(relax_op._BY_SCRIPT))
    relax_op.register("nn.test_only_identity", ("data",), infer_unary)
    x = relax.Var("x", TS([2], "float32"))
    call = relax.op.nn.test_only_identity(x)
    assert call.op.name == "relax.nn.test_only_identity" and call.struct_info is x.struct_info


def test_op_arguments_and_attributes() -> None:
    w = relax.Var("w", TS([3, 4], "float32"))
    x = relax.Var("x", TS([2, 3], "float32"))
    by_position = relax.op.permute_dims(w, [1, 0])
    by_keyword = relax.op.permute_dims(w, axes=[1, 0])
    assert structural_equal(by_position, by_keyword) and by_keyword.attrs["axes"] == (1, 0)
    mm = relax.op.matmul(x, w, out_dtype="float16")
    assert str(mm.struct_info.dtype) == "float16" and [d.value for d in mm.struct_info.dims] == [2, 4]
    assert structural_equal(relax.op.add(x1=x, x2=x), relax.op.add(x, x))
    with pytest.raises(tvm.TVMSError, match="did you mean 'out_dtype'"):
        relax.op.matmul(x, w, out_dtyp="float16")
    with pytest.raises(AttributeError, match="no operator 'rleu'"):
        relax.op.nn.rleu(x)


def test_struct_info_from_python_lists() -> None:
    n = size("n")
    s = relax.TensorStructInfo([n, 784], "float32")
    assert s.ndim == 2 and s.dims[0] is n and s.dims[1].dtype == DataType("int64") and s.dims[1].value == 784
    assert isinstance(s.shape, relax.ShapeExpr) and s.dtype == DataType("float32")
    assert relax.TensorStructInfo(ndim=2, dtype="float32").shape is None
    assert relax.ShapeStructInfo([n, 4]).ndim == 2
    assert relax.PrimStructInfo("int64").dtype == DataType("int64")
    assert relax.TupleStructInfo([s, s]).fields == (s, s)
    assert relax.Tuple([relax.Var("a", s)]).struct_info.fields == (s,)
    assert relax.PrimValue(3).struct_info.dtype == DataType("int64")


def test_an_if_gets_what_the_parser_gives_it() -> None:
    """The builder's struct info of an if is the parser's (TVM's least common ancestor): branches
    of one shape and two dtypes keep the shape. The builder kept only the rank, so a module it
    made did not read back as itself (found by the fresh-example Relax round-trip property)."""
    from tvms.ir.struct_info import TensorStructInfo

    x = relax.Var("x", relax.TensorStructInfo((1,), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((1,), "float16"))
    cond = relax.Var("cond", relax.TensorStructInfo((), "bool"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y, cond]):
        then = relax.SeqExpr([], x)
        other = relax.SeqExpr([], y)
        z = bb.emit(relax.If(cond, then, other), "z")
        bb.emit_func_output(z)
    mod = bb.get()
    sinfo = mod["main"].body.blocks[0].bindings[0].value.struct_info
    assert isinstance(sinfo, TensorStructInfo) and sinfo.ndim == 1 and sinfo.shape is not None
    assert str(sinfo.dtype) == "void"
    assert first_mismatch(mod, from_source(mod.script(dialect="classic"))) is None
