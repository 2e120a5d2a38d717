"""The postprocessor interface: finish a sampled schedule (rewrite marks into loops, decompose
reductions) or reject it (``apply`` returns False)."""
from __future__ import annotations

import copy
from typing import Any

from ...ir.errors import TVMSError


class Postproc:
    """TVM's ``Postproc``: subclasses override ``apply(sch) -> bool``."""

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Told the task once before use; nothing to learn by default."""

    def apply(self, sch: Any) -> bool:
        raise TVMSError(f"{type(self).__name__} does not define apply(sch)")

    def clone(self) -> "Postproc":
        return copy.deepcopy(self)

    @staticmethod
    def create(kind: str) -> list["Postproc"]:
        """The default postprocessors of a target kind (``"llvm"``)."""
        from .space_generator import default_part
        parts = default_part(kind, "postprocs")
        if not parts:
            raise TVMSError(f"no default postprocessors for target kind {kind!r}")
        return parts

    def __repr__(self) -> str:
        return f"meta_schedule.{type(self).__name__}"


PyPostproc = Postproc  # TVM's base for postprocessors written in Python: in tvms every one is
