"""The IR remembers the dialect it was read in (issue 13, point 6): detected once per text by the
parser, kept through copies, passes and schedules, out of structural equality, and used by the
schedule's trace, ``fmt`` and the CLI instead of looking at the text again."""
from __future__ import annotations

import pytest
from conftest import FIXTURES

import tvms
from tvms import relax, te
from tvms.ir import IRModule, structural_equal, structural_hash
from tvms.script import dialect, from_source
from tvms.script.formatting import format_script
from tvms.tir import Schedule

MATMUL_027 = (FIXTURES / "schedule" / "matmul_00_base.tvms").read_text()
MATMUL_CLASSIC = from_source(MATMUL_027).script(dialect="classic")

ADD_RELAX = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), y: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        z = R.add(x, y)
        return z
'''


def scheduled_trace(node) -> str:
    sch = Schedule(node)
    sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 8])
    return "\n".join(sch.trace.as_python())


@pytest.fixture
def scans(monkeypatch) -> list[int]:
    """The lengths of the texts whose dialect is looked for, in order."""
    found: list[int] = []
    markers = dialect._TVM027_MARKERS

    class Counting:
        def search(self, text: str):
            found.append(len(text))
            return markers.search(text)

    monkeypatch.setattr(dialect, "_TVM027_MARKERS", Counting())
    return found


def test_a_parsed_module_and_its_functions_record_their_dialect() -> None:
    mod = from_source(MATMUL_027)
    assert mod.source_dialect == "tvm-0.27" and mod["main"].source_dialect == "tvm-0.27"
    classic = from_source(MATMUL_CLASSIC)
    assert classic.source_dialect == "classic" and classic["main"].source_dialect == "classic"
    func = from_source(classic["main"].script(dialect="tvm-0.27"))  # a bare @T.prim_func
    assert func.source_dialect == "tvm-0.27"
    rmod = from_source(ADD_RELAX)
    assert rmod.source_dialect == "classic" and rmod["main"].source_dialect == "classic"


def test_a_tirx_annotation_key_prints_in_the_classic_dialect_as_tir() -> None:
    """A schedule keeps an annotation key as given (DLight marks its copies with TVM 0.27's
    ``tirx.`` key). The classic text spells it ``tir.``: a ``"tirx.`` in it would make the parser
    read the whole text as 0.27's, where a function-level ``T.alloc_buffer`` is no allocation of
    the root block (the tuning builder's text then lost PlanAndUpdateBufferAllocationLocation's
    places, and ManifestSharedMemoryLocalStage refused DLight's fp16 matmul)."""
    sch = Schedule(from_source(MATMUL_CLASSIC))
    cache = sch.cache_read(sch.get_block("C"), 0, "shared")
    sch.annotate(cache, "tirx.manifest_shared_memory_local_stage", 1)
    text = sch.mod.script(dialect="classic")
    assert '"tir.manifest_shared_memory_local_stage": 1' in text and "tirx" not in text
    again = from_source(text)
    assert again.source_dialect == "classic" and again.script(dialect="classic") == text
    assert [b.name for b in again["main"].body.block.alloc_buffers] == ["A_shared"]
    assert '"tirx.manifest_shared_memory_local_stage": 1' in again.script(dialect="tvm-0.27")


def test_a_tvm027_module_schedules_with_a_tvm027_trace(scans) -> None:
    mod = from_source(MATMUL_027)
    expected = ('b0 = sch.get_sblock(name="C", func_name="main")\n'
                'l1, l2, l3 = sch.get_loops(block=b0)\n'
                'l4, l5 = sch.split(loop=l1, factors=[None, 8], preserve_unit_iters=True, disable_predication=False)')
    assert scheduled_trace(mod) == expected
    assert scheduled_trace(mod["main"]) == expected  # a function taken out of the module remembers it
    assert scheduled_trace(IRModule({"main": mod["main"]})) == expected  # and so does a module made of it
    assert scans == [len(MATMUL_027)]  # the parser's detection, and no other


def test_a_classic_module_schedules_with_a_classic_trace(scans) -> None:
    mod = from_source(MATMUL_CLASSIC)
    assert scheduled_trace(mod) == ('b0 = sch.get_block(name="C", func_name="main")\n'
                                    'l1, l2, l3 = sch.get_loops(block=b0)\n'
                                    'l4, l5 = sch.split(loop=l1, factors=[None, 8], preserve_unit_iters=True)')
    assert scans == [len(MATMUL_CLASSIC)]


def test_the_dialect_is_not_part_of_structural_equality_or_hashing() -> None:
    new, old = from_source(MATMUL_027), from_source(MATMUL_CLASSIC)
    assert new.source_dialect != old.source_dialect
    assert structural_equal(new, old) and structural_equal(new["main"], old["main"])
    assert structural_hash(new) == structural_hash(old)
    assert structural_hash(new["main"]) == structural_hash(old["main"])


def test_the_dialect_survives_copies_schedules_and_passes() -> None:
    mod = from_source(MATMUL_027)
    assert mod.copy().source_dialect == "tvm-0.27"
    assert mod.with_attrs({"k": 1}).source_dialect == "tvm-0.27"
    sch = Schedule(mod)
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    assert sch.mod.source_dialect == "tvm-0.27" and sch.mod["main"].source_dialect == "tvm-0.27"
    rmod = from_source(ADD_RELAX)
    for passes in ([relax.transform.LegalizeOps()],
                   [relax.transform.LegalizeOps(), relax.transform.FuseOps(), relax.transform.FuseTIR()]):
        out = rmod
        for p in passes:
            out = p(out)
        assert out.source_dialect == "classic" and out["main"].source_dialect == "classic"


def test_a_module_built_in_python_has_no_source_dialect_and_a_classic_trace() -> None:
    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 64), name="B")
    C = te.compute((64, 64), lambda i, j: A[i, j] + B[i, j], name="C")
    mod = IRModule({"main": te.create_prim_func([A, B, C])})
    assert mod.source_dialect is None and mod["main"].source_dialect is None
    sch = Schedule(mod)
    sch.get_block("C")
    assert sch.trace.as_python() == ['b0 = sch.get_block(name="C", func_name="main")']
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(relax.op.add(x, x)))
    assert bb.get().source_dialect is None


def test_fmt_prints_in_the_dialect_the_parser_recorded(scans) -> None:
    assert format_script(MATMUL_027, "new.tvms") == MATMUL_027
    assert format_script(MATMUL_CLASSIC, "old.tvms") == MATMUL_CLASSIC
    assert scans == [len(MATMUL_027), len(MATMUL_CLASSIC)]


def test_a_tirx_value_in_classic_text_is_data_not_a_dialect_marker() -> None:
    """TVM 0.27's SplitHostDevice names "tirx.use_dyn_shared_memory" among a kernel's launch
    parameters: printed in the classic dialect the value stays, and the text reads back as
    classic, the same module (it was read as 0.27's, where T.alloc_buffer means another thing)."""
    text = (FIXTURES / "cuda_runtime" / "dyn_shared_SplitHostDevice.tvms").read_text()
    mod = from_source(text)
    classic = mod.script(dialect="classic")
    assert '"tirx.use_dyn_shared_memory"' in classic
    again = from_source(classic)
    assert again.source_dialect == "classic" and structural_equal(mod, again)


def test_a_tir_key_in_tvm027_text_is_another_key_than_its_tirx_namesake() -> None:
    """TVM 0.27 reads a "tir." attribute key as it is written (a key from before its renaming,
    "tir.noalias" in texts written for an older TVM): it prints it back so, beside its "tirx."
    namesake (tests/fixtures/unrenamed_attr_key, TVM's text), and no pass takes it for noalias.
    Classic text shows the key with its prefix, and reads back to the same module."""
    folder = FIXTURES / "unrenamed_attr_key"
    mod = from_source((folder / "input.tvms").read_text())
    expected = (folder / "expected.tvms").read_text()
    assert mod.script(dialect="tvm-0.27") + "\n" == expected
    assert from_source(expected).script(dialect="tvm-0.27") + "\n" == expected
    unrenamed = dialect.UNRENAMED_KEY_PREFIX
    assert dict(mod.attrs) == {"global_symbol": "main", "tir.noalias": True, unrenamed + "tir.noalias": True,
                               unrenamed + "tir.is_scheduled": True}
    only_unrenamed = from_source(expected.replace('"tirx.noalias": True', '"tirx.y": 1'))
    assert "tir.noalias" not in only_unrenamed.attrs
    classic = mod.script(dialect="classic")
    assert f'"{unrenamed}tir.noalias": True' in classic and '"tir.noalias": True' in classic
    again = from_source(classic)
    assert again.source_dialect == "classic" and structural_equal(again, mod)
    assert again.script(dialect="tvm-0.27") + "\n" == expected


def test_a_tir_key_of_module_attrs_in_tvm027_text_is_another_key_too() -> None:
    """``I.module_attrs`` reads its keys as function attributes do: TVM 0.27 prints a "tir." key
    back as written, beside its "tirx." namesake (tests/fixtures/unrenamed_attr_key, TVM's text)."""
    folder = FIXTURES / "unrenamed_attr_key"
    mod = from_source((folder / "input_module.tvms").read_text())
    expected = (folder / "expected_module.tvms").read_text()
    assert mod.script(dialect="tvm-0.27") + "\n" == expected
    unrenamed = dialect.UNRENAMED_KEY_PREFIX
    assert dict(mod.attrs) == {unrenamed + "tir.x": 1, "tir.x": 2, "y": 3}
    classic = mod.script(dialect="classic")
    assert f'"{unrenamed}tir.x": 1' in classic and '"tir.x": 2' in classic
    again = from_source(classic)
    assert structural_equal(again, mod) and again.script(dialect="tvm-0.27") + "\n" == expected
