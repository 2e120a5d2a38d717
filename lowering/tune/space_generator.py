"""Space generators: a module -> its design spaces, schedules whose traces sample decisions.

A space generator also carries what the search applies to every candidate drawn from it: the
schedule rules that made the space, the postprocessors that verify and rewrite each candidate,
and the mutators (with their probabilities) that evolve its decisions. Given as a target kind
(``"llvm"``) or ``"from-target"`` (the default: the kind of the task's target), they are looked
up when the generator meets its task (``_initialize_with_tune_context``) in the table of
defaults each target's space registers with ``register_defaults``.
"""
from __future__ import annotations

import copy
import re
from typing import Any, Callable

from ...ir.errors import TVMSError
from ...ir.module import IRModule
from ..schedule.schedule import Schedule

FROM_TARGET = "from-target"
# target kind -> {"sch_rules": f() -> list, "postprocs": f() -> list, "mutator_probs": f() -> dict}
_DEFAULTS: dict[str, dict[str, Callable[[], Any]]] = {}


def register_defaults(kind: str, **makers: Callable[[], Any]) -> None:
    """Register a target kind's default ``sch_rules``, ``postprocs`` or ``mutator_probs``, each
    as a function making fresh ones (``register_defaults("llvm", postprocs=llvm_postprocs)``)."""
    unknown = set(makers) - {"sch_rules", "postprocs", "mutator_probs"}
    if unknown:
        raise TVMSError(f"register_defaults: unknown part {', '.join(sorted(unknown))}")
    _DEFAULTS.setdefault(kind, {}).update(makers)


def default_part(kind: str, part: str) -> Any:
    """A fresh copy of the default ``part`` of target kind ``kind`` (none registered: empty)."""
    from . import default_space  # noqa: F401  (the built-in rows, registered when first needed)

    maker = _DEFAULTS.get(kind, {}).get(part)
    if maker is not None:
        return maker()
    return {} if part == "mutator_probs" else []


def space_kind(target: Any) -> str | None:
    """The default space of a target, as TVM picks it: its kind, "cuda-tensorcore" for a cuda
    target of compute capability 7.5 or more."""
    if target is None:
        return None
    sm = sm_number(target)
    if target.kind == "cuda" and sm is not None and sm >= 75:
        return "cuda-tensorcore"
    return target.kind


def sm_number(target: Any) -> int | None:
    """The compute capability of a target's ``arch`` as the meta-schedule reads it: the number
    that starts what follows ``sm_`` (``sm_90a`` is 90; DLight reads no number there); None
    without one."""
    sm = re.match(r"sm_(\d+)", str(target.attrs.get("arch", "")))
    return None if sm is None else int(sm.group(1))


class SpaceGenerator:
    """``generate_design_space(mod) -> list[Schedule]``, with the parts the search applies:
    ``sch_rules``, ``postprocs``, ``mutator_probs`` (lists / a dict, a target kind, or
    ``"from-target"``)."""

    def __init__(self, sch_rules: Any = FROM_TARGET, postprocs: Any = FROM_TARGET,
                 mutator_probs: Any = FROM_TARGET) -> None:
        self.sch_rules = sch_rules
        self.postprocs = postprocs
        self.mutator_probs = mutator_probs
        self.context: Any = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Resolve the parts given by name for the task's target, and tell them the task."""
        self.context = context
        kind = space_kind(context.target)
        for part in ("sch_rules", "postprocs", "mutator_probs"):
            value = getattr(self, part)
            if isinstance(value, str):
                name = kind if value == FROM_TARGET else value
                if name is None:
                    raise TVMSError(f"{type(self).__name__}: {part}='from-target' needs a task with a target")
                setattr(self, part, default_part(name, part))
        for part in [*self.sch_rules, *self.postprocs, *self.mutator_probs]:
            if hasattr(part, "_initialize_with_tune_context"):
                part._initialize_with_tune_context(context)

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        raise NotImplementedError

    def clone(self) -> "SpaceGenerator":
        """An independent copy (its parts cloned) for another task."""
        other = copy.copy(self)
        other.context = None
        other.sch_rules = _clone_parts(self.sch_rules)
        other.postprocs = _clone_parts(self.postprocs)
        other.mutator_probs = self.mutator_probs if isinstance(self.mutator_probs, str) else \
            {_clone(m): p for m, p in self.mutator_probs.items()}
        return other

    def _fork_seed(self) -> int | None:
        return self.context.fork_seed() if self.context is not None else None

    @staticmethod
    def create(kind: Any = "post-order-apply", *args: Any, **kwargs: Any) -> "SpaceGenerator":
        """A space generator from a short form, as ``tune_tir``'s ``space=`` takes it: a
        SpaceGenerator, a schedule function (``ScheduleFn``), a list of them (``union``),
        ``"post-order-apply"``, or a target kind (post-order-apply with that kind's parts)."""
        if isinstance(kind, SpaceGenerator):
            return kind
        if callable(kind):  # (as TVM: a bare function gets no rules, postprocessors or mutators)
            parts = dict(zip(("sch_rules", "postprocs", "mutator_probs"), args))
            return ScheduleFn(kind, **{"sch_rules": [], "postprocs": [], "mutator_probs": {}, **parts, **kwargs})
        if isinstance(kind, (list, tuple)):
            return SpaceGeneratorUnion([SpaceGenerator.create(k) for k in kind], *args, **kwargs)
        if kind == "union":
            return SpaceGeneratorUnion(*args, **kwargs)
        if isinstance(kind, str):
            from .post_order_apply import PostOrderApply

            if kind == "post-order-apply":
                return PostOrderApply(*args, **kwargs)
            return PostOrderApply(sch_rules=kind, postprocs=kind, mutator_probs=kind)
        raise TVMSError(f"not a space generator: {kind!r}")


def _clone(part: Any) -> Any:
    return part.clone() if hasattr(part, "clone") else part


def _clone_parts(parts: Any) -> Any:
    return parts if isinstance(parts, str) else [_clone(p) for p in parts]


class ScheduleFn(SpaceGenerator):
    """``ScheduleFn(sch_fn, sch_rules="from-target", postprocs="from-target",
    mutator_probs="from-target")``: the design space a user's stochastic schedule function
    draws. ``sch_fn`` takes a Schedule of the module and changes it (returning None), or
    returns a Schedule, or a list of them."""

    def __init__(self, sch_fn: Callable[[Schedule], Any], sch_rules: Any = FROM_TARGET,
                 postprocs: Any = FROM_TARGET, mutator_probs: Any = FROM_TARGET) -> None:
        if not callable(sch_fn):
            raise TVMSError(f"ScheduleFn takes a function of a Schedule, got {type(sch_fn).__name__}")
        super().__init__(sch_rules, postprocs, mutator_probs)
        self.sch_fn = sch_fn

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        sch = Schedule(mod, seed=self._fork_seed())
        result = self.sch_fn(sch)
        if result is None:
            return [sch]
        if isinstance(result, Schedule):
            return [result]
        if isinstance(result, (list, tuple)) and all(isinstance(s, Schedule) for s in result):
            return list(result)
        name = getattr(self.sch_fn, "__name__", "the schedule function")
        raise TVMSError(f"ScheduleFn: {name} returned {type(result).__name__}; it returns None, "
                        f"a Schedule or a list of Schedules")


class SpaceGeneratorUnion(SpaceGenerator):
    """``SpaceGeneratorUnion(space_generators, ...)``: the design spaces of all of them."""

    def __init__(self, space_generators: list, sch_rules: Any = FROM_TARGET, postprocs: Any = FROM_TARGET,
                 mutator_probs: Any = FROM_TARGET) -> None:
        super().__init__(sch_rules, postprocs, mutator_probs)
        self.space_generators = list(space_generators)

    def _initialize_with_tune_context(self, context: Any) -> None:
        super()._initialize_with_tune_context(context)
        for space in self.space_generators:
            space._initialize_with_tune_context(context)

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        return [sch for space in self.space_generators for sch in space.generate_design_space(mod)]

    def clone(self) -> "SpaceGeneratorUnion":
        other = super().clone()
        other.space_generators = [s.clone() for s in self.space_generators]
        return other
