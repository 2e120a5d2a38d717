"""Names of a package that import their module on first use (PEP 562), so that ``import tvms``
(or ``tvms.relax``, or a CPU build of ``lowering.tir``) does not pay for the parts a program never
touches."""
from __future__ import annotations

import importlib
import importlib.util


def lazy_names(package: str, namespace: dict, names: dict) -> tuple:
    """``__getattr__``, ``__dir__`` and a function loading them all for ``package`` (whose globals
    are ``namespace``; the last is for ``ir.registry.add_layer_loader``): ``names``
    maps a name to ``(module, attribute)``, the module relative to the package (``.runtime``,
    ``..lowering.build``) and the attribute None for the module itself; any other submodule of the
    package also loads when first named."""

    def __getattr__(name: str):
        if name in names:
            module, attribute = names[name]
            found = importlib.import_module(module, package)
            value = getattr(found, attribute) if attribute else found
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list:
        return sorted(set(namespace) | set(names))

    def load_all() -> None:
        for name in names:
            __getattr__(name)

    return __getattr__, __dir__, load_all
