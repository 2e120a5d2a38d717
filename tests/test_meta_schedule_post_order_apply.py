"""PostOrderApply with rules written in Python (TVM's test_meta_schedule_post_order_apply.py
cases on smaller workloads): branching, a rule removing a block the next rules no longer see, the
block filter, custom rules by annotation, and the refusals."""
from __future__ import annotations

import pytest

import tvms
from tvms import meta_schedule as ms
from tvms.ir.errors import TVMSError
from tvms.lowering.tune.post_order_apply import PostOrderApply

TRINITY = """
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 64), "float32"), D: T.Buffer((64, 64), "float32")):
    B = T.sblock_alloc_buffer((64, 64))
    C = T.sblock_alloc_buffer((64, 64))
    for i, j in T.grid(64, 64):
        with T.sblock("A"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
    for i, j in T.grid(64, 64):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(3.0)
    for i, j in T.grid(64, 64):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi, vj] * T.float32(5.0)
"""


def trinity() -> tvms.IRModule:
    return tvms.IRModule({"main": tvms.script.from_source(TRINITY)})


def is_root(sch, block) -> bool:
    return sch.get_sref(block).parent is None


class TwoTilings(ms.ScheduleRule):
    """Branches every non-root block into two tilings (TVM's TrinityDoubleRule)."""

    def apply(self, sch, block):
        if is_root(sch, block):
            return [sch]
        result = []
        for factors in ([16, 4], [2, 32]):
            new = sch.copy()
            i, j = new.get_loops(block)
            i0, i1 = new.split(i, factors)
            j0, j1 = new.split(j, factors[::-1])
            new.reorder(i0, j0, i1, j1)
            result.append(new)
        return result


class InlineB(ms.ScheduleRule):
    def apply(self, sch, block):
        if not is_root(sch, block) and sch.get(block).name_hint == "B":
            sch.compute_inline(block)
        return [sch]


def space(rules, **kwargs) -> list:
    generator = PostOrderApply(sch_rules=rules, postprocs=[], mutator_probs={}, **kwargs)
    return ms.TuneContext(trinity(), "llvm", generator, rand_state=0).generate_design_space()


def test_a_removed_block_is_skipped_by_later_rules() -> None:
    schedules = space([InlineB(), TwoTilings()])
    assert len(schedules) == 4  # A and C branch in two each; B is gone
    for sch in schedules:
        with pytest.raises(TVMSError):
            sch.get_sblock("B")
        lines = str(sch.trace).splitlines()
        assert lines[2:6] == ['  b0 = sch.get_sblock(name="A", func_name="main")',
                              '  b1 = sch.get_sblock(name="B", func_name="main")',
                              '  b2 = sch.get_sblock(name="C", func_name="main")',
                              '  b3 = sch.get_sblock(name="root", func_name="main")']
        assert lines[6] == "  sch.compute_inline(block=b1)"
        assert "l4, l5 = sch.get_loops(block=b2)" in lines[7]  # C (visited first) before A


def test_block_filter_and_branching() -> None:
    assert len(space([TwoTilings()])) == 8
    only = lambda names: (lambda block: block.name_hint in names)  # noqa: E731
    assert len(space([TwoTilings()], f_block_filter=only(["B"]))) == 2
    assert len(space([TwoTilings()], f_block_filter=only(["A", "C"]))) == 4


def test_custom_rule_by_annotation() -> None:
    mod = trinity()
    sch = tvms.tir.Schedule(mod)
    sch.annotate(sch.get_block("B"), "schedule_rule", "split_b")
    seen = []

    def split_b(sch, block):
        seen.append(sch.get(block).name_hint)
        sch.split(sch.get_loops(block)[0], [None, 8])
        return [sch]

    tvms.register_func("s_tir.meta_schedule.cpu.split_b", split_b, override=True)
    generator = PostOrderApply(sch_rules=[ms.schedule_rule.ApplyCustomRule(), InlineB()],
                               postprocs=[], mutator_probs={})
    (result,) = ms.TuneContext(sch.mod, "llvm", generator, rand_state=0).generate_design_space()
    assert seen == ["B"]
    assert "sch.compute_inline" not in str(result.trace)  # InlineB leaves an annotated block alone
    assert 'sch.split(loop=' in str(result.trace)


def test_refusals() -> None:
    with pytest.raises(TVMSError, match="no schedule rules"):
        PostOrderApply().generate_design_space(trinity())
    with pytest.raises(TVMSError, match="no default schedule rules for target kind 'rocm'"):
        ms.ScheduleRule.create("rocm")
    with pytest.raises(TVMSError, match="invalid tiling structure"):
        ms.schedule_rule.MultiLevelTiling("SSX")
    with pytest.raises(TVMSError, match="unknown reuse type 'often'"):
        ms.schedule_rule.MultiLevelTiling("SSRSRS", reuse_write=ms.schedule_rule.ReuseType("often", [1], "global"))
    duplicate = tvms.script.from_source(TRINITY.replace('T.sblock("C")', 'T.sblock("A")'))
    generator = PostOrderApply(sch_rules=[TwoTilings()], postprocs=[], mutator_probs={})
    with pytest.raises(TVMSError, match="two blocks of one name"):
        generator.generate_design_space(duplicate)
