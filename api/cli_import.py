"""``tvms import``: an ONNX model to a TVMScript module (``tvms.relax.frontend.onnx.from_onnx``).

The weights are constants printed in the module's metadata section, so ``tvms build``/``run``
and every other subcommand read the file as it is. With ``--keep-params-in-input`` they are
further parameters of ``main`` instead (``num_input`` counts the model's inputs) and their values
go to a side ``.npz`` file (``-o model.tvms`` -> ``model.params.npz``, one array per parameter).

Exit codes: 0 done, 1 the model has an operator or a form tvms does not convert, 2 usage or
input error (no ``onnx`` package, an unreadable or invalid model, a bad ``--shape``).
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import zipfile

from .cli import EXIT_ERROR, EXIT_FAILED, _error, emit_text
from .ir import TVMSError


def _shape(text: str) -> tuple[str, list]:
    """``x=1,3,224,224`` -> ("x", [1, 3, 224, 224]); a non-number names a symbolic size."""
    name, sep, dims = text.partition("=")
    if not sep or not name or not dims:
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,..., got {text!r}")
    return name, [int(d) if d.strip().lstrip("-").isdigit() else d.strip() for d in dims.split(",")]


def _npz(arrays: dict) -> bytes:
    """An ``.npz`` of ``arrays`` (name -> array), as np.savez writes one: written entry by entry,
    since np.savez would take a weight named ``file`` or ``allow_pickle`` for its own option."""
    import numpy as np

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w") as entry:
                np.lib.format.write_array(entry, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def cmd_import(args: argparse.Namespace) -> int:
    try:
        import onnx  # noqa: F401
    except ImportError:
        _error("import: the onnx package is not installed (pip install 'tvms[onnx]')")
        return EXIT_ERROR
    from .ir.files import WriteError, write_file
    from .script.onnx_convert import InvalidModel
    from .script.onnx_frontend import detach_params, from_onnx, load_model

    try:
        model = load_model(args.input)
    except TVMSError as err:
        _error(str(err))
        return EXIT_ERROR
    shapes = dict(args.shape or [])
    known = {i.name for i in model.graph.input}
    unknown = sorted(set(shapes) - known)
    if unknown:
        _error(f"import: --shape names {', '.join(unknown)}, not an input of the model "
               f"(inputs: {', '.join(sorted(known))})")
        return EXIT_ERROR
    try:
        mod = from_onnx(model, shape_dict=shapes, keep_params_in_input=args.keep_params_in_input)
    except TVMSError as err:
        print(f"{args.input}: {err}", file=sys.stderr)
        return EXIT_ERROR if isinstance(err, InvalidModel) else EXIT_FAILED
    mod, params = detach_params(mod)
    if not params.get("main"):
        return emit_text(mod.script(show_meta=True), args.output)
    if not args.output or args.output == "-":
        _error("import: --keep-params-in-input writes the values beside -o FILE: give -o")
        return EXIT_ERROR
    names = [p.name for p in mod["main"].params[mod["main"].attrs["num_input"]:]]
    stem = args.output[:-len(".tvms")] if args.output.endswith(".tvms") else args.output
    try:
        write_file(stem + ".params.npz", _npz(dict(zip(names, params["main"]))))
    except WriteError as err:
        _error(str(err))
        return EXIT_ERROR
    code = emit_text(mod.script(show_meta=True), args.output)
    if code != 0:  # (no values left beside a module that was not written)
        os.remove(stem + ".params.npz")
    return code


def add_import_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "import", help="convert an ONNX model to a TVMScript module",
        description=("Convert an ONNX model (.onnx) to a Relax module in TVMScript, written to "
                     "standard output or atomically to -o FILE. The weights are constants in the "
                     "module's metadata section; with --keep-params-in-input they are parameters "
                     "of main after the model's inputs, and their values go to FILE's stem + "
                     ".params.npz. Exit codes: 0 done, 1 an operator or form that is not "
                     "supported, 2 usage or input error (an invalid model included)."))
    p.add_argument("input", metavar="MODEL.onnx", help="the ONNX model")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the module to FILE (atomically) instead of standard output")
    p.add_argument("--shape", action="append", type=_shape, metavar="NAME=D1,D2,...",
                   help="the shape of an input (repeatable); a name instead of a number is a "
                        "symbolic size (--shape x=batch,3,224,224)")
    p.add_argument("--keep-params-in-input", action="store_true",
                   help="weights as parameters of main (values in FILE.params.npz), not constants")
    p.set_defaults(func=cmd_import)

