"""Module-level global infos: ``I.module_global_infos({"vdevice": [I.vdevice(...), ...]})``.

A virtual device names where a tensor lives: ``R.Tensor((2, 3), "float32", vdevice="cuda:0")``
refers to the first ``cuda`` entry of the module's ``vdevice`` list. The target is kept as the
dict TVM prints (``{"keys": ["cpu"], "kind": "llvm", ...}``); a bare kind (``I.vdevice("llvm")``)
and a dict without some options take the ones TVM 0.27 adds to that kind, except those TVM
detects on the host (``mtriple``, a GPU's ``arch``), which tvms cannot know as TVM's build does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import TVMSError
from .node import FrozenDict, Node

# what TVM 0.27 fills in for a target given by its kind alone (Target(kind).export()), less the
# options its build detects on the host (llvm's mtriple, cuda's arch, rocm's mcpu and mtriple)
_LIMITS = {"max_num_threads": 256, "max_threads_per_block": 256}
KIND_DEFAULTS: dict[str, dict] = {
    "llvm": {"keys": ("cpu",)},
    "c": {"keys": ("cpu",)},
    "cuda": {"keys": ("cuda", "gpu"), "max_num_threads": 1024, "thread_warp_size": 32},
    "rocm": {"keys": ("rocm", "gpu"), "thread_warp_size": 64, "max_shared_memory_per_block": 65536, **_LIMITS},
    "metal": {"keys": ("metal", "gpu"), "max_function_args": 31, "thread_warp_size": 16,
              "max_shared_memory_per_block": 32768, **_LIMITS},
    "vulkan": {"keys": ("vulkan", "gpu"), "thread_warp_size": 1, "supports_int32": True,
               "supports_float32": True, **_LIMITS},
    "opencl": {"keys": ("opencl", "gpu"), "image_base_address_alignment": 64, "max_function_args": 128,
               "texture_depth_limit": 2048, "texture_spatial_limit": 16384, "thread_warp_size": 1,
               "max_shared_memory_per_block": 16384, **_LIMITS},
    "webgpu": {"keys": ("webgpu", "gpu"), "thread_warp_size": 1, "supports_subgroups": False,
               "max_shared_memory_per_block": 32768, "max_num_threads": 256},
}


@dataclass(frozen=True, slots=True, eq=False)
class VDevice(Node):
    """``I.vdevice(target, vdevice_id, memory_scope)``; ``target`` is the target's config dict."""

    target: FrozenDict
    vdevice_id: int = 0
    memory_scope: str = "global"

    @property
    def kind(self) -> str:
        return str(self.target["kind"])


@dataclass(frozen=True, slots=True, eq=False)
class DummyGlobalInfo(Node):
    """``I.dummy_global_info()``: a placeholder entry."""


def make_vdevice(target: Any, vdevice_id: int = 0, memory_scope: str = "global") -> VDevice:
    """A VDevice from what ``I.vdevice`` takes: a kind (``"cuda"``) or a config dict."""
    if isinstance(target, str):
        target = {"kind": target.split()[0] if target.strip() else ""}
    if not isinstance(target, dict) or "kind" not in target:
        raise TVMSError(f"I.vdevice takes a target kind or a dict with a \"kind\", got {target!r}")
    kind = target["kind"]
    if kind not in KIND_DEFAULTS:
        raise TVMSError(f"I.vdevice: unknown target kind {kind!r}; tvms knows {', '.join(KIND_DEFAULTS)}")
    target = {"tag": "", **KIND_DEFAULTS[kind], **target}
    if not isinstance(vdevice_id, int) or not isinstance(memory_scope, str):
        raise TVMSError("I.vdevice(target, vdevice_id: int, memory_scope: str)")
    config = {k: tuple(v) if isinstance(v, list) else v for k, v in sorted(target.items())}
    return VDevice(FrozenDict(config), vdevice_id, memory_scope)


def vdevice_label(vdev: VDevice, vdevices: tuple) -> str:
    """``"cuda:1:global"``: the kind, the index among the module's vdevices of that kind (-1 when it
    is not in the list), the memory scope; how TVM names a tensor's vdevice."""
    index = 0
    for v in vdevices:
        if v is vdev:
            return f"{vdev.kind}:{index}:{vdev.memory_scope}"
        index += v.kind == vdev.kind
    return f"{vdev.kind}:-1:{vdev.memory_scope}"


def lookup_vdevice(label: str, vdevices: tuple) -> VDevice:
    """The vdevice ``"llvm"``, ``"cuda:1"`` or ``"vdevice:3"`` (the fourth of the list) names,
    as TVM's parser finds it (a memory scope after a second colon is the entry's own)."""
    parts = label.split(":")
    kind = parts[0]
    try:
        index = int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise TVMSError(f"a vdevice is written \"kind:index\", got {label!r}") from None
    if kind == "vdevice":
        if 0 <= index < len(vdevices):
            return vdevices[index]
    else:
        same = [v for v in vdevices if v.kind == kind]
        if 0 <= index < len(same):
            return same[index]
    listed = ", ".join(vdevice_label(v, vdevices) for v in vdevices) or "none"
    raise TVMSError(f"the vdevice {label!r} is not in the module's I.module_global_infos "
                    f"(it has {listed})")


__all__ = ["VDevice", "DummyGlobalInfo", "make_vdevice", "vdevice_label", "lookup_vdevice", "KIND_DEFAULTS"]
