"""Issue 14's checklist: what Apache TVM 0.27 has (the fixtures of ``tools/tvm_inventory.py``,
in tests/fixtures/inventory/) against what tvms knows.

Each list below names what tvms lacks today. The test fails when a name of the fixture is unknown
to tvms and not listed (something was lost, or the fixture grew), and when a listed name becomes
known (take it off the list): the lists only shrink. ``python tests/test_inventory.py`` prints
the coverage of each checklist.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

import tvms  # noqa: F401  (importing the package registers every operator and builtin)
from tvms.ir import relax_op
from tvms.script.relax_parser import is_r_builtin_name
from tvms.script.tensorir.evaluator import is_builtin_name
from tvms.tir import Schedule

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "inventory"


def _lines(text: str) -> list[str]:
    return [line for line in text.split() if line]


# Relax operators TVM registers (relax.txt, `relax.*`) that ir/relax_ops*.py lacks
MISSING_RELAX_OPS = _lines("""
""")

# `R.*` script names (relax.txt) the Relax parser does not accept
MISSING_R_NAMES = _lines("""
""")

# `T.*` names of TVM's TensorIR script namespace (tir.txt) the TensorIR parser does not accept
MISSING_TIR_NAMES = _lines("""
T.ExecScope
T.Iter
T.Layout
T.SMEMPool
T.ScopeIdDef
T.TMEMPool
T.alloc_cast_frag
T.alloc_tcgen05_ldst_frag
T.call_kernel
T.smem
T.tensormap_encode_tiled
T.tmem
T.wg_reg_tile
""")

# Names of TVM 0.27's script namespaces that are not TVMScript text: the Python IR builder behind
# TVM's parser, decorators of Python sources. TVM's printer never writes them, so a .tvms file
# never holds them, and tvms does not accept them. Group -> (reason, names); README's checklist
# section lists the same names with the same reasons.
NOT_SCRIPT: dict[str, tuple[str, list[str]]] = {
    "Relax builder frames": (
        "frames and calls of the IR builder that TVM's parser drives; the text spells them as "
        "Python `if`/`else`, `def`, assignments and `return`",
        _lines("""
R.Else R.If R.SeqExpr R.Then R.arg R.emit R.emit_match_cast R.emit_te R.emit_var_binding R.emit_with_ty
R.emit_with_type R.func_name R.func_ret_ty R.func_ret_type R.func_ret_value
""")),
    "Relax Python decorators": (
        "decorators of Python source that TVM expands while parsing (`R.macro`) or that build a "
        "pattern rewriter, not a module (`R.rewriter`)",
        _lines("R.macro R.rewriter")),
    "TensorIR node classes": (
        "constructors of IR nodes that the text writes as operators, literals or statements "
        "(`a & b`, `T.int32(1)`, `break`)",
        _lines("""
T.BitwiseAnd T.BitwiseNot T.BitwiseOr T.BitwiseXor T.LShift T.RShift T.IntImm T.FloatImm T.Var
T.Call T.BufferLoad T.CommReducer T.IterVar T.Reduce T.CallEffectKind T.Range T.Tuple T.Break
T.Continue
""")),
    "TensorIR builder API": (
        "calls of TVM's Python IR builder for PrimFuncs; the text spells them as `def`, "
        "parameters and blocks",
        _lines("""
T.arg T.func_name T.func_ret T.iter_var T.add_to_parent T.register_script_namespace
T.block_name_suffix_context
""")),
    "TensorIR parse-time metaprogramming": (
        "evaluated while TVM reads a Python decorator (macros, meta variables, marker types, "
        "LLVM's numeric intrinsic ids); they leave no IR of their own",
        _lines("""
T.macro T.inline T.jit T.meta_var T.meta_class T.constexpr T.Optional T.scalar_wrapper
T.DtypeConstructor T.LetAnnotation T.LocalVectorAnnotation T.llvm_lookup_intrinsic_id
""")),
    "TensorIR pointer declarers": (
        "the printer writes a pointer variable as `T.handle(dtype, scope)`, which tvms reads",
        _lines("T.ptr T.Ptr T.buffer_var")),
}
NOT_SCRIPT_NAMES = {name for _, names in NOT_SCRIPT.values() for name in names}

# methods of TVM's Schedule (schedule.txt) that tvms' Schedule lacks
MISSING_SCHEDULE_METHODS = _lines("""
""")


def _fixture(name: str, prefix: str = "") -> list[str]:
    """The names of a fixture file (``#`` lines are its header), those starting with ``prefix``."""
    path = FIXTURES / name
    names = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return [n for n in names if n.startswith(prefix)]


def _knows_relax_op(name: str) -> bool:
    return relax_op.lookup(name) is not None


def _knows_schedule_method(name: str) -> bool:
    return not name.startswith("_") and hasattr(Schedule, name)


# checklist -> (fixture, prefix of its lines, does tvms know the name?, the names it lacks)
CHECKLISTS: dict[str, tuple[str, str, Callable[[str], bool], list[str]]] = {
    "relax operators": ("relax.txt", "relax.", _knows_relax_op, MISSING_RELAX_OPS),
    "R names": ("relax.txt", "R.", lambda n: is_r_builtin_name(n[len("R."):]), MISSING_R_NAMES),
    "T names": ("tir.txt", "T.", lambda n: is_builtin_name(n[len("T."):]), MISSING_TIR_NAMES),
    "schedule methods": ("schedule.txt", "", _knows_schedule_method, MISSING_SCHEDULE_METHODS),
}


def coverage(checklist: str) -> tuple[int, int]:
    """(names tvms knows, names of TVM 0.27 that are TVMScript) for one checklist."""
    fixture, prefix, knows, _ = CHECKLISTS[checklist]
    names = [n for n in _fixture(fixture, prefix) if n not in NOT_SCRIPT_NAMES]
    return sum(map(knows, names)), len(names)


@pytest.mark.parametrize("checklist", list(CHECKLISTS))
def test_missing_list_is_exact(checklist):
    fixture, prefix, knows, missing = CHECKLISTS[checklist]
    names = _fixture(fixture, prefix)
    assert names, f"{fixture} holds no {checklist}: regenerate it with tools/tvm_inventory.py"
    lost = sorted(n for n in names if not knows(n) and n not in missing and n not in NOT_SCRIPT_NAMES)
    assert not lost, f"{checklist} of TVM 0.27 that tvms does not know and the list does not name: {lost}"
    learned = sorted(n for n in missing if knows(n))
    assert not learned, f"tvms knows these now: take them off the missing {checklist}: {learned}"
    stale = sorted(set(missing) - set(names))
    assert not stale, f"the missing {checklist} name what TVM 0.27 does not have: {stale}"
    assert missing == sorted(set(missing)), f"keep the missing {checklist} sorted, each once"
    known, total = coverage(checklist)
    print(f"{checklist}: {known}/{total} known to tvms ({100 * known / total:.1f}%)")


@pytest.mark.parametrize("checklist, unknown", [
    ("relax operators", "relax.no_such_op"), ("R names", "R.no_such_op"),
    ("T names", "T.no_such_builtin"), ("schedule methods", "no_such_primitive")])
def test_a_name_tvms_lacks_is_not_known(checklist, unknown):
    # the predicates decide the coverage: none may accept everything
    assert not CHECKLISTS[checklist][2](unknown)


def test_names_that_are_not_script_stay_unknown_and_documented():
    """Each exception is a name of the fixtures that tvms does not accept, and the README names it
    (with its group's reason)."""
    names = set(_fixture("relax.txt")) | set(_fixture("tir.txt"))
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for group, (reason, members) in NOT_SCRIPT.items():
        assert group in readme, f"README does not list the group {group!r}"
        for name in members:
            assert name in names, f"{name} is not a name of TVM 0.27's fixtures"
            assert f"`{name}`" in readme, f"README does not list {name} ({group})"
            prefix, rest = name.split(".", 1)
            known = is_r_builtin_name(rest) if prefix == "R" else is_builtin_name(rest)
            assert not known, f"tvms accepts {name}: take it off NOT_SCRIPT"


def test_fixtures_say_how_they_were_made():
    for name in ("relax.txt", "tir.txt", "schedule.txt"):
        header = [line for line in (FIXTURES / name).read_text().splitlines() if line.startswith("#")]
        assert any("tools/tvm_inventory.py" in line for line in header), name
        assert any(line.startswith("# Apache TVM 0.27") for line in header), name


if __name__ == "__main__":
    for checklist in CHECKLISTS:
        known, total = coverage(checklist)
        print(f"{checklist}: {known}/{total} ({100 * known / total:.1f}%)")
