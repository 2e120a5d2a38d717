"""Distributed Relax (TVM's ``relax.distributed``): device meshes, placements and the struct info
of a tensor sharded over a mesh, ``R.DTensor((128, 128), "float32", "mesh[0]", "S[0], R")``.

A mesh is a module global info (``I.module_global_infos({"mesh": [R.device_mesh((2, 2),
I.Range(0, 4))]})``), named ``"mesh[i]"`` by the functions. A placement says, per mesh axis,
whether the tensor is replicated (``R``) or sharded along a tensor axis (``S[k]``). tvms reads,
prints and infers these as TVM 0.27; it does not run distributed programs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import TVMSError
from .struct_info import StructInfo, TensorStructInfo
from .node import Node

_SPEC = re.compile(r"^(R|S\[(\d+)\])$")


@dataclass(frozen=True, slots=True, eq=False)
class DeviceMesh(Node):
    """``R.device_mesh((2, 2), I.Range(0, 4))`` or ``R.device_mesh((2,), [5, 7])``: the mesh's
    shape and its devices, as a range (``device_range``: start, end) or a list (``device_ids``)."""

    shape: tuple
    device_ids: tuple | None = None
    device_range: tuple | None = None


def make_device_mesh(shape: object, devices: object) -> DeviceMesh:
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) for d in shape):
        raise TVMSError(f"a device mesh's shape is a tuple of integers, got {shape!r}")
    count = 1
    for d in shape:
        count *= d
    if isinstance(devices, range):
        ids, rng = None, (devices.start, devices.stop)
        n = devices.stop - devices.start
    elif isinstance(devices, (tuple, list)) and all(isinstance(d, int) for d in devices):
        ids, rng, n = tuple(devices), None, len(devices)
    else:
        raise TVMSError(f"a device mesh's devices are I.Range(start, end) or a list of ids, got {devices!r}")
    if n != count:
        raise TVMSError(f"a device mesh of shape {tuple(shape)} needs {count} devices, got {n}")
    return DeviceMesh(tuple(shape), ids, rng)


def placement_text(text: object, mesh: DeviceMesh | None = None) -> str:
    """A placement as TVM writes it (``"S[1], R"``), one spec per mesh axis."""
    if not isinstance(text, str):
        raise TVMSError(f"a placement is a string such as \"S[0], R\", got {text!r}")
    specs = [s.strip() for s in text.split(",")]
    if not all(_SPEC.match(s) for s in specs):
        raise TVMSError(f"a placement lists R (replicated) or S[axis] (sharded) per mesh axis, got {text!r}")
    if mesh is not None and len(specs) != len(mesh.shape):
        raise TVMSError(f"the placement {text!r} has {len(specs)} entries for a mesh of {len(mesh.shape)} axes")
    return ", ".join(specs)


@dataclass(frozen=True, slots=True, eq=False)
class DTensorStructInfo(StructInfo):
    """A tensor distributed over ``device_mesh`` as ``placement`` says (TVM's DTensorType)."""

    tensor_sinfo: TensorStructInfo
    device_mesh: DeviceMesh
    placement: str

    @property
    def dims(self) -> tuple | None:
        return self.tensor_sinfo.dims


def mesh_label(mesh: DeviceMesh, meshes: tuple) -> str | None:
    """``"mesh[i]"`` when ``mesh`` is the module's i-th mesh, else None."""
    for i, m in enumerate(meshes):
        if m is mesh:
            return f"mesh[{i}]"
    return None


def device_mesh_text(mesh: DeviceMesh, namespace: str) -> str:
    """``R.device_mesh((2, 2), I.Range(0, 4))``: the range in ``namespace`` (I at module level)."""
    shape = f"({', '.join(map(str, mesh.shape))}{',' if len(mesh.shape) == 1 else ''})"
    if mesh.device_range is not None:
        devices = f"{namespace}.Range({mesh.device_range[0]}, {mesh.device_range[1]})"
    else:
        devices = f"[{', '.join(map(str, mesh.device_ids))}]"
    return f"R.device_mesh({shape}, {devices})"


def lookup_mesh(label: str, meshes: tuple) -> DeviceMesh:
    match = re.fullmatch(r"mesh\[(\d+)\]", label)
    if match is None or int(match.group(1)) >= len(meshes):
        raise TVMSError(f"the device mesh {label!r} is not in the module's I.module_global_infos "
                        f"(it has {len(meshes)} meshes)")
    return meshes[int(match.group(1))]


__all__ = ["DeviceMesh", "DTensorStructInfo", "device_mesh_text", "make_device_mesh", "placement_text", "mesh_label", "lookup_mesh"]
