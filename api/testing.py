"""``tvms.testing``: what TVM's own tests reach for in ``tvm.testing``.

``assert_allclose`` compares tensors and arrays with TVM's default tolerances;
``device_enabled(target)`` says whether tvms can compile for ``target``'s kind here and its device
exists (gate a test with ``pytest.mark.skipif(not device_enabled("cuda"), ...)``, or use the
ready-made ``requires_gpu`` / ``requires_cuda`` / ``requires_llvm`` markers); ``parameter`` makes a
parametrized pytest fixture of the name it is assigned to; ``main()`` runs the calling test file.
"""
from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np

from .ir.target import as_target
from .lowering.targets import compiled_kinds
from .runtime.device import device as _device

# the device each compiled target kind runs on
_DEVICE_OF_KIND = {"llvm": "cpu", "cuda": "cuda"}


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7,
                    verbose: bool = True) -> None:
    """``np.testing.assert_allclose`` on tensors or arrays, after checking the shapes agree
    (``actual`` and ``desired`` are not interchangeable: the bound is atol + rtol * |desired|)."""
    actual, desired = np.asanyarray(actual), np.asanyarray(desired)
    if actual.shape != desired.shape:
        raise AssertionError(f"shapes differ: actual {actual.shape}, desired {desired.shape}")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=verbose)


def device_enabled(target: Any) -> bool:
    """True when tvms compiles for ``target``'s kind and the device it runs on exists."""
    kind = as_target(target).kind
    if kind not in compiled_kinds():
        return False
    return _device(_DEVICE_OF_KIND.get(kind, kind)).exist


def enabled_targets() -> list:
    """(target kind, device) of every kind ``device_enabled`` accepts."""
    return [(kind, _device(_DEVICE_OF_KIND.get(kind, kind))) for kind in compiled_kinds()
            if device_enabled(kind)]


def _requires(kind: str, what: str) -> Any:
    import pytest

    return pytest.mark.skipif(not device_enabled(kind), reason=f"needs {what}")


def __getattr__(name: str) -> Any:
    # markers are made when asked for, so importing tvms.testing does not import pytest
    wanted = {"requires_llvm": ("llvm", "the llvm target"), "requires_gpu": ("cuda", "a CUDA GPU"),
              "requires_cuda": ("cuda", "a CUDA GPU and tvms's cuda target")}
    if name in wanted:
        return _requires(*wanted[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parameter(*values: Any, ids: Any = None) -> Any:
    """A parametrized pytest fixture: ``dtype = tvms.testing.parameter("float32", "float16")``
    makes every test taking ``dtype`` run once per value."""
    import pytest

    @pytest.fixture(params=values, ids=ids)
    def as_fixture(request: Any) -> Any:
        return request.param
    return as_fixture


def main() -> None:
    """Run the calling test file with pytest (``if __name__ == "__main__": tvms.testing.main()``)."""
    import pytest

    caller = inspect.stack()[1].filename
    sys.exit(pytest.main([caller, *sys.argv[1:]]))


__all__ = ["assert_allclose", "device_enabled", "enabled_targets", "main", "parameter",
           "requires_cuda", "requires_gpu", "requires_llvm"]
