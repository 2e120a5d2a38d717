"""The pass infrastructure: passes, Sequential, PassContext, instruments, the registry."""
from __future__ import annotations

import dataclasses
import io

import pytest

import tvms as tvm
from conftest import FIXTURES
from tvms import relax
from tvms.lowering import pass_registry
from tvms.script import from_source

SOURCE = (FIXTURES / "seeds_relax" / "seed003_relax_mlp_exported.tvms").read_text()


@pytest.fixture
def mod():
    return from_source(SOURCE, "mlp.tvms")


@pytest.fixture(autouse=True)
def clean_registry():
    saved = dict(pass_registry._REGISTRY), dict(pass_registry._SOURCES)
    yield
    pass_registry._REGISTRY.clear()
    pass_registry._REGISTRY.update(saved[0])
    pass_registry._SOURCES.clear()
    pass_registry._SOURCES.update(saved[1])


def tagging_pass(tag: str, opt_level: int = 0, log: list | None = None):
    """A module pass that appends ``tag`` to the module attribute "trail"."""

    @tvm.transform.module_pass(opt_level=opt_level, name=f"Tag{tag}")
    def run(m, ctx):
        if log is not None:
            log.append(tag)
        return m.with_attrs({"trail": str(m.attrs.get("trail", "")) + tag})

    return run


# ----------------------------------------------------------------------------- passes


def test_module_pass_on_a_class_as_in_seed_003(mod):
    @tvm.transform.module_pass(opt_level=0, name="Rename")
    class AddAttr:
        def __init__(self, value="x"):
            self.value = value

        def transform_module(self, m, _ctx):
            return m.with_attrs({"note": self.value})

    p = AddAttr("y")
    assert isinstance(p, tvm.transform.Pass)
    assert p.info.name == "Rename" and p.info.opt_level == 0
    assert p.value == "y"  # the user's attributes stay reachable
    out = p(mod)
    assert out.attrs["note"] == "y"
    assert "note" not in mod.attrs


def test_a_pass_never_changes_its_input(mod):
    @tvm.transform.module_pass(opt_level=0)
    def drop_all(m, ctx):
        for name in list(m):
            del m[name]  # in place, on the pass's own copy
        return m

    out = drop_all(mod)
    assert len(out) == 0
    assert list(mod) == ["forward"]
    assert drop_all.info.name == "drop_all"


def test_function_pass_rewrites_every_relax_function(mod):
    @tvm.transform.function_pass(opt_level=0, name="MarkFuncs")
    class Mark:
        def transform_function(self, func, m, ctx):
            return func.with_attr("marked", True)

    out = Mark()(mod)
    assert out["forward"].attrs["marked"]
    assert "marked" not in mod["forward"].attrs


def test_a_pass_that_returns_no_module_is_named_in_the_error(mod):
    @tvm.transform.module_pass(opt_level=0, name="Forgetful")
    def forgetful(m, ctx):
        return None

    with pytest.raises(tvm.transform.PassError, match="'Forgetful': returned NoneType"):
        forgetful(mod)


def test_an_exception_inside_a_pass_names_the_pass(mod):
    @tvm.transform.module_pass(opt_level=0, name="Crash")
    def crash(m, ctx):
        raise ValueError("boom")

    with pytest.raises(tvm.transform.PassError, match="'Crash': ValueError: boom") as info:
        crash(mod)
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.pass_name == "Crash"


def test_bad_opt_level_is_refused():
    with pytest.raises(tvm.TVMSError, match="opt_level"):
        tvm.transform.module_pass(lambda m, c: m, opt_level=-1)
    with pytest.raises(tvm.TVMSError, match="transform_module"):
        tvm.transform.module_pass(opt_level=0)(type("NoMethod", (), {}))


# ----------------------------------------------------------------------------- Sequential and PassContext


def test_sequential_runs_in_order(mod):
    log: list = []
    seq = tvm.transform.Sequential([tagging_pass(t, log=log) for t in "abc"], name="abc")
    out = seq(mod)
    assert log == ["a", "b", "c"]
    assert out.attrs["trail"] == "abc"


def test_sequential_skips_passes_above_the_context_opt_level(mod):
    seq = tvm.transform.Sequential([tagging_pass("a", 0), tagging_pass("b", 3), tagging_pass("c", 2)])
    assert seq(mod).attrs["trail"] == "ac"  # default context: opt_level 2
    with tvm.transform.PassContext(opt_level=3):
        assert seq(mod).attrs["trail"] == "abc"
    with tvm.transform.PassContext(opt_level=0):
        assert seq(mod).attrs["trail"] == "a"
    with tvm.transform.PassContext(opt_level=0, required_pass=["Tagb"], disabled_pass=["Taga"]):
        assert seq(mod).attrs["trail"] == "b"


def test_a_pass_called_directly_runs_whatever_its_opt_level(mod):
    # as in TVM: only Sequential consults the context's opt_level
    with tvm.transform.PassContext(opt_level=0):
        assert tagging_pass("z", 4)(mod).attrs["trail"] == "z"


def test_pass_context_nests_and_current():
    default = tvm.transform.PassContext.current()
    assert default.opt_level == 2
    with tvm.transform.PassContext(opt_level=3, config={"k": 1}) as outer:
        assert tvm.transform.PassContext.current() is outer
        with tvm.transform.PassContext(opt_level=1) as inner:
            assert tvm.transform.PassContext.current() is inner
        assert tvm.transform.PassContext.current() is outer
        assert outer.config == {"k": 1}
    assert tvm.transform.PassContext.current() is default


def test_the_context_reaches_the_pass(mod):
    seen = []

    @tvm.transform.module_pass(opt_level=0)
    def look(m, ctx):
        seen.append(ctx.config.get("flag"))
        return m

    with tvm.transform.PassContext(config={"flag": "on"}):
        look(mod)
    assert seen == ["on"]


def test_tvm_ir_transform_is_the_same_module():
    import tvms.ir.transform

    assert tvm.ir.transform is tvm.transform is tvms.ir.transform
    assert tvm.ir.instrument.PrintAfterAll is tvm.instrument.PrintAfterAll


# ----------------------------------------------------------------------------- instruments


def test_print_after_all_prints_each_pass_result(mod):
    out = io.StringIO()
    seq = tvm.transform.Sequential([tagging_pass("a"), tagging_pass("b")])
    with tvm.transform.PassContext(instruments=[tvm.instrument.PrintAfterAll(file=out)]):
        seq(mod)
    text = out.getvalue()
    assert text.count("After Running Pass: ") == 2
    assert "After Running Pass: Taga (opt_level=0)" in text
    assert text.count("class Module:") == 2
    assert text.count("= R.nn.relu(add)") == 2


def test_timing_instrument_reports_each_pass(mod):
    timing = tvm.instrument.PassTimingInstrument()
    with tvm.transform.PassContext(instruments=[timing]):
        tvm.transform.Sequential([tagging_pass("a"), tagging_pass("b")])(mod)
        assert [name for name, _ in timing.timings] == ["Taga", "Tagb"]
        assert all(sec >= 0 for _, sec in timing.timings)
        report = timing.render()
    assert report.splitlines()[0] == "Pass timing:"
    assert "Taga" in report and "Tagb" in report and "total" in report
    assert timing.timings == []  # render forgets


def test_instrument_hooks_and_should_run(mod):
    calls = []

    @tvm.instrument.pass_instrument
    class Skipper(tvm.instrument.PassInstrument):
        def enter_pass_ctx(self):
            calls.append("enter")

        def exit_pass_ctx(self):
            calls.append("exit")

        def should_run(self, m, info):
            return info.name != "Tagb"

        def run_before_pass(self, m, info):
            calls.append(f"before {info.name}")

        def run_after_pass(self, m, info):
            calls.append(f"after {info.name}")

    with tvm.transform.PassContext(instruments=[Skipper()]):
        out = tvm.transform.Sequential([tagging_pass("a"), tagging_pass("b")])(mod)
    assert out.attrs["trail"] == "a"
    assert calls == ["enter", "before Taga", "after Taga", "exit"]


@tvm.transform.module_pass(opt_level=0, name="BadName")
def bad_name(m, ctx):
    """Renames a parameter but not its uses: the printed text no longer parses."""
    f = m["forward"]
    new_param = relax.Var("x_renamed", f.params[0].struct_info)
    m["forward"] = dataclasses.replace(f, params=(new_param,) + f.params[1:])
    return m


@tvm.transform.module_pass(opt_level=0, name="Unprintable")
def unprintable(m, ctx):
    m["forward"] = object()
    return m


def test_verify_each_accepts_a_good_pass(mod):
    with tvm.transform.PassContext(instruments=[tvm.instrument.VerifyEachInstrument()]):
        out = tagging_pass("a")(mod)
    assert out.attrs["trail"] == "a"


def test_verify_each_names_a_pass_whose_output_does_not_parse(mod):
    seq = tvm.transform.Sequential([tagging_pass("a"), bad_name])
    with tvm.transform.PassContext(instruments=[tvm.instrument.VerifyEachInstrument()]):
        with pytest.raises(tvm.transform.PassError, match="'BadName': produced IR whose printed "
                                                          "text does not parse") as info:
            seq(mod)
    assert info.value.pass_name == "BadName"
    assert "undefined variable 'x'" in str(info.value)
    bad_name(mod)  # without the instrument nothing checks


def test_verify_each_names_a_pass_whose_output_cannot_print(mod):
    with tvm.transform.PassContext(instruments=[tvm.instrument.VerifyEachInstrument()]):
        with pytest.raises(tvm.transform.PassError, match="'Unprintable': produced IR that cannot "
                                                          "be printed"):
            unprintable(mod)


def test_verify_roundtrip_reports_a_structural_change(mod, monkeypatch):
    from tvms.lowering import instrument

    other = from_source(SOURCE.replace("R.nn.relu", "R.nn.gelu"))
    monkeypatch.setattr("tvms.script.from_source", lambda text, name: other)
    with pytest.raises(tvm.transform.PassError, match="not structurally equal"):
        instrument.verify_roundtrip(mod, "Sneaky")


# ----------------------------------------------------------------------------- registry


def test_register_get_and_list():
    @tvm.transform.register_pass()
    @tvm.transform.module_pass(opt_level=0, name="MyIdentityForTest")
    class Mine:
        def transform_module(self, m, ctx):
            return m

    assert "MyIdentityForTest" in tvm.transform.list_passes()
    made = tvm.transform.get_pass("MyIdentityForTest")
    assert isinstance(made, Mine) and made.info.name == "MyIdentityForTest"
    with pytest.raises(tvm.TVMSError, match="already registered"):
        tvm.transform.register_pass("MyIdentityForTest", lambda: made)
    tvm.transform.register_pass("MyIdentityForTest", tagging_pass("q"), override=True)
    assert tvm.transform.get_pass("MyIdentityForTest").info.name == "Tagq"


def test_unknown_pass_lists_close_names():
    tvm.transform.register_pass("ReluToGeluForTest", tagging_pass("r"))
    with pytest.raises(tvm.TVMSError, match="unknown pass 'ReluToGeluForTst'; did you mean "
                                            "'ReluToGeluForTest'"):
        tvm.transform.get_pass("ReluToGeluForTst")


def test_load_passes_finds_top_level_passes(tmp_path):
    path = tmp_path / "passes.py"
    path.write_text(
        "import tvms as tvm\n"
        "@tvm.transform.module_pass(opt_level=0, name='LoadedA')\n"
        "class A:\n"
        "    def transform_module(self, mod, ctx):\n"
        "        return mod\n"
        "@tvm.transform.module_pass(opt_level=1, name='LoadedB')\n"
        "def b(mod, ctx):\n"
        "    return mod\n"
        "_private = tvm.transform.module_pass(lambda m, c: m, opt_level=0, name='Hidden')\n")
    assert tvm.transform.load_passes(str(path)) == ["LoadedA", "LoadedB"]
    assert tvm.transform.get_pass("LoadedB").info.opt_level == 1
    assert "Hidden" not in tvm.transform.list_passes()


def test_load_passes_reports_a_broken_file(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('nope')\n")
    with pytest.raises(tvm.TVMSError, match="cannot load passes from .*broken.py: RuntimeError: nope"):
        tvm.transform.load_passes(str(path))
    with pytest.raises(tvm.TVMSError, match="no such file"):
        tvm.transform.load_passes(str(tmp_path / "missing.py"))


def test_verify_each_keeps_the_constants_a_pass_makes():
    """FoldConstant turns a computation into a constant: the check prints it with its value
    (show_meta), so the module reads back the same; it had printed the constant as omitted
    metadata and reported a pass that did nothing wrong."""
    folded = from_source('''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main() -> R.Tensor((2, 3), dtype="int32"):
        with R.dataflow():
            a: R.Tensor((2, 3), dtype="int32") = R.ones(R.shape([2, 3]), dtype="int32")
            b: R.Tensor((2, 3), dtype="int32") = R.add(a, a)
            R.output(b)
        return b''')
    with tvm.transform.PassContext(instruments=[tvm.instrument.VerifyEachInstrument()]):
        out = tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.FoldConstant()])(folded)
    assert "metadata" in out.script()
