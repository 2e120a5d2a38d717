"""Where NVIDIA's Python wheels put their files: the folders of a package such as
``nvidia.cuda_runtime`` (CUDA 12's, one package a component) or ``nvidia.cu13`` (CUDA 13's, all
in one). Code generation looks there for NVRTC's headers and the runtime for cuBLAS."""
from __future__ import annotations

import importlib.util
import pathlib


def package_folders(module: str) -> list[pathlib.Path]:
    """The folders of ``module``; none where it (or the ``nvidia`` namespace) is not installed."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # (no ``nvidia`` package at all: a toolkit-only machine)
        return []
    return [pathlib.Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
