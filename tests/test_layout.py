"""Guards on the package layout: every project module is imported under one name only, and every
import follows the layer rule of DESIGN.md (ir <- script <- lowering <- runtime, api on top)."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("ir", "script", "lowering", "runtime", "grammars", "api")
# what each layer may import of the others (api is the face ``tvms``: it may import anything)
ALLOWED = {
    "ir": set(),
    "script": {"ir"},
    "lowering": {"ir", "script"},
    "runtime": {"ir"},
    "grammars": set(),
    "api": set(LAYERS),
}
# (file, imported module or package) -> why the import is allowed
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("lowering/tune/runner.py", "tvms.runtime"):
        "DESIGN.md: the tuning runner loads and times built code through runtime's public loader",
}


def _excepted(rel: Path, module: str) -> bool:
    return any(file == rel.as_posix() and (module == allowed or module.startswith(allowed + "."))
               for file, allowed in EXCEPTIONS)


def _package(rel: Path) -> list[str]:
    """The dotted package of a project file: ``lowering/relax/x.py`` -> tvms.lowering.relax,
    ``api/relax/x.py`` -> tvms.relax (api is the package ``tvms`` itself)."""
    parts = list(rel.parts[:-1])
    return ["tvms"] + (parts[1:] if parts[0] == "api" else parts)


def _layer_of(module: str) -> str | None:
    """The layer a ``tvms.*`` module belongs to; None for a module outside the project."""
    parts = module.split(".")
    if parts[0] != "tvms":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS[:-1] else "api"


def imported_modules(source: str, rel: Path) -> list[tuple[int, str, list[str]]]:
    """Every import of a file, as (line, absolute module, names taken from it), relative imports
    resolved and imports inside functions included."""
    package = _package(rel)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if not node.module or module == "tvms":  # (``from . import x``: the modules x)
                found += [(node.lineno, f"{module}.{name}", []) for name in names]
            else:
                found.append((node.lineno, module, names))
    return sorted(found, key=lambda entry: entry[0])


def violations(source: str, rel: Path) -> list[str]:
    """The imports of the file ``rel`` (relative to the repository) that break the layer rule:
    a layer importing one above it (or beside it), or a private name of another layer."""
    layer = rel.parts[0]
    bad = []
    for line, module, names in imported_modules(source, rel):
        target = _layer_of(module)
        if target is None or target == layer:
            continue
        if _excepted(rel, module):
            continue
        if target not in ALLOWED[layer]:
            bad.append(f"{rel}:{line}: the {layer} layer imports {module} ({target})")
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        if private and layer != "api":
            bad.append(f"{rel}:{line}: {', '.join(private)} is private to {module}")
    return bad


def project_files() -> list[Path]:
    return sorted(p.relative_to(ROOT) for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def test_every_module_imports_downwards_only() -> None:
    files = project_files()
    assert len(files) > 100 and {f.parts[0] for f in files} >= {"ir", "script", "lowering", "runtime", "api"}
    bad = [v for rel in files for v in violations((ROOT / rel).read_text(), rel)]
    assert not bad, "imports against the layer rule (DESIGN.md):\n" + "\n".join(bad)


def test_the_exceptions_are_still_needed() -> None:
    """An exception the code no longer needs is removed from the list, not kept around."""
    for file, module in EXCEPTIONS:
        modules = [m for _, m, _ in imported_modules((ROOT / file).read_text(), Path(file))]
        assert any(m == module or m.startswith(module + ".") for m in modules), (file, module)


def test_the_checker_catches_upward_and_private_imports() -> None:
    source = ("from ..ir import relax\n"
              "from ...script.block_builder import BlockBuilder\n"
              "def f():\n"
              "    from ...runtime.vm import VirtualMachine\n"
              "    from tvms.runtime import registry\n"
              "    import tvms.lowering.build\n"
              "from ...script.block_builder import _Frame\n")
    bad = violations(source, Path("lowering/relax/x.py"))
    assert bad == ["lowering/relax/x.py:4: the lowering layer imports tvms.runtime.vm (runtime)",
                   "lowering/relax/x.py:5: the lowering layer imports tvms.runtime (runtime)",
                   "lowering/relax/x.py:7: _Frame is private to tvms.script.block_builder"]
    assert violations("from .. import script\n", Path("ir/x.py")) == \
        ["ir/x.py:1: the ir layer imports tvms.script (script)"]
    assert violations("from ..lowering.build import build\n", Path("runtime/x.py")) == \
        ["runtime/x.py:1: the runtime layer imports tvms.lowering.build (lowering)"]
    assert violations("from .lowering.build import build\nfrom .runtime import vm\n", Path("api/x.py")) == []
    assert violations("from ..ir import relax\n", Path("api/relax/x.py")) == []  # (tvms.ir)
    assert violations("from ..script import parser\n", Path("runtime/x.py")) == \
        ["runtime/x.py:1: the runtime layer imports tvms.script (script)"]


def test_no_module_is_imported_twice() -> None:
    import tvms
    import tvms.script  # noqa: F401

    for name in dir(tvms):  # (the face imports its parts on first use: every layer)
        getattr(tvms, name)

    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if any(f"/{layer}/" in path for layer in LAYERS) and "/site-packages/" not in path \
                and "/tests/" not in path:
            assert name.startswith("tvms"), f"{path} is imported as {name!r}, not under tvms.*"
