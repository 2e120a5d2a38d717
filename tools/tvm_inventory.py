"""Write the checklist of issue 14 from an installed Apache TVM: the fixtures under
``tests/fixtures/inventory/`` that ``tests/test_inventory.py`` compares with what tvms knows.

Run it with the Python of a side virtualenv holding Apache TVM 0.27 (never tvms' own)::

    /work/tvm-venv/bin/python tools/tvm_inventory.py [--out tests/fixtures/inventory]

Three files, one name a line, each opened by ``#`` lines giving the command and TVM's version:

- ``relax.txt``: the Relax operators TVM registers (``relax.nn.conv2d``, from
  ``tvm.ir.Op.list_op_names()``) and the script names of its ``R`` namespace (``R.nn.conv2d``,
  from ``tvm.script.parser.relax``: its ``__all__`` and the public functions of the operator
  namespaces it holds, such as ``R.nn`` and ``R.memory``);
- ``tir.txt``: the ``T.<name>`` of TVM's TensorIR script namespace (its ``__all__``);
- ``schedule.txt``: the public methods and properties of TVM's schedule class.
"""
from __future__ import annotations

import argparse
import inspect
import pathlib
import sys
import types

import tvm

DEFAULT_OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "inventory"


def relax_names() -> list[str]:
    """``relax.<op>`` registered operators, then the ``R.<name>`` of the script namespace."""
    import tvm.script.parser.relax as R

    ops = sorted(n for n in tvm.ir.Op.list_op_names() if n.startswith("relax."))
    script = set()
    for name in R.__all__:
        value = getattr(R, name)
        if isinstance(value, types.ModuleType):
            # ``R.nn``, ``R.memory``, ...: a namespace; its functions are the script names
            script.update(f"{name}.{member}" for member, obj in vars(value).items()
                          if not member.startswith("_") and inspect.isfunction(obj))
        else:
            script.add(name)
    return ops + sorted("R." + n for n in script)


def _tir_script_module() -> types.ModuleType:
    """TVM 0.27 names the TensorIR dialect ``tirx``; earlier releases ``tir``."""
    import importlib

    for dialect in ("tirx", "tir"):
        try:
            return importlib.import_module(f"tvm.script.parser.{dialect}")
        except ImportError:
            continue
    raise SystemExit("this TVM has neither tvm.script.parser.tirx nor tvm.script.parser.tir")


def tir_names() -> list[str]:
    """``T.<name>`` for every name TVM's TensorIR script namespace exports, each once."""
    return sorted({"T." + n for n in _tir_script_module().__all__})  # TVM's __all__ repeats some


def _schedule_class() -> type:
    for module in ("tvm.s_tir", "tvm.tir"):
        try:
            cls = getattr(__import__(module, fromlist=["Schedule"]), "Schedule", None)
        except ImportError:
            continue
        if cls is not None:
            return cls
    raise SystemExit("this TVM has neither tvm.s_tir.Schedule nor tvm.tir.Schedule")


def schedule_names() -> list[str]:
    """The public methods and properties the schedule class defines (not those of its FFI base
    class such as ``same_as``, nor type aliases such as ``AnnotationValueT``)."""
    cls = _schedule_class()
    package = cls.__module__.rsplit(".", 1)[0]
    names = set()
    for owner in cls.__mro__:
        if not owner.__module__.startswith(package):
            continue
        for name, obj in vars(owner).items():
            if not name.startswith("_") and (inspect.isfunction(obj) or isinstance(obj, (property, staticmethod, classmethod))):
                names.add(name)
    return sorted(names)


def write(path: pathlib.Path, what: str, names: list[str], command: str) -> None:
    header = [f"# {what}", f"# made by: {command}", f"# Apache TVM {tvm.__version__}", f"# {len(names)} names"]
    path.write_text("\n".join(header + names) + "\n")
    print(f"{path}: {len(names)} names")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="the fixture folder")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python tools/tvm_inventory.py  (the python of a virtualenv with `pip install apache-tvm==0.27.*`)"
    schedule = _schedule_class()
    write(args.out / "relax.txt", "Relax operators (relax.*) and R.* script names", relax_names(), command)
    write(args.out / "tir.txt", f"T.* names of {_tir_script_module().__name__}", tir_names(), command)
    write(args.out / "schedule.txt", f"public methods of {schedule.__module__}.{schedule.__qualname__}",
          schedule_names(), command)


if __name__ == "__main__":
    main(sys.argv[1:])
