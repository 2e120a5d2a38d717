"""The ``tvms`` command line tool.

``main(argv)`` parses the arguments and dispatches to one function per subcommand
(``cmd_fmt``, ...); each returns the process exit code. To add a subcommand, write
``_add_<name>_parser(subparsers)`` (which sets ``func=cmd_<name>``) and ``cmd_<name>(args)``,
and call the former from ``build_parser``.

Exit codes: 0 success, 1 ``fmt --check`` found files to reformat or an ``opt`` pass failed,
2 usage error or an input that could not be read or parsed (``TVMSError``), 130 interrupted. Bugs (any other
exception) are not swallowed: they propagate with their traceback.
"""
from __future__ import annotations

import argparse
import difflib
import os
import stat
import sys
import tempfile
from typing import Sequence

from . import __version__
from .ir import TVMSError
from .ir.deep import run_deep

PROG = "tvms"
STDIN_NAME = "<stdin>"

EXIT_OK = 0
EXIT_CHANGED = 1
EXIT_PASS_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


class InputError(Exception):
    """A file that cannot be read or written; reported as ``tvms: error: ...``."""


# --------------------------------------------------------------------------- helpers


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _decode(data: bytes, name: str) -> str:
    try:
        # utf-8-sig: a leading byte order mark is dropped (it is not TVMScript).
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        bad = data[err.start:err.start + 1]
        raise InputError(
            f"cannot read {name}: not valid UTF-8 (byte 0x{bad.hex()} at offset {err.start})"
        ) from None


def read_source(path: str) -> tuple[str, str]:
    """``(name, text)`` of a file, or of standard input for ``-``. Raises InputError."""
    if path == "-":
        stream = sys.stdin
        buffer = getattr(stream, "buffer", None)
        if buffer is None:  # a text stream without bytes underneath (io.StringIO in tests)
            return STDIN_NAME, stream.read()
        return STDIN_NAME, _decode(buffer.read(), STDIN_NAME)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from None
    return path, _decode(data, path)


def write_atomic(path: str, text: str) -> None:
    """Replace ``path``'s contents with ``text`` (UTF-8) atomically.

    The text goes to a temporary file in the same directory, is fsynced, gets the
    original file's permission bits, and then replaces the original with ``os.replace``.
    On any failure the original is untouched and the temporary file is removed.
    A symbolic link is followed: the file it points to is rewritten, the link stays.
    """
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    tmp_name = None
    try:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:  # a new file: the permissions the umask allows
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        with tempfile.NamedTemporaryFile(
            "wb", delete=False, dir=directory,
            prefix="." + os.path.basename(target) + ".", suffix=".tmp",
        ) as tmp:
            tmp_name = tmp.name
            tmp.write(text.encode("utf-8"))
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as err:
        raise InputError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


def unified_diff(before: str, after: str, name: str) -> str:
    """A unified diff with ``--- NAME`` / ``+++ NAME (formatted)`` headers ('' if equal).

    A last line without a newline is followed by git's ``\\ No newline at end of file``."""
    lines = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=name, tofile=f"{name} (formatted)",
    ):
        if line.endswith("\n"):
            lines.append(line)
        else:
            lines.append(line + "\n\\ No newline at end of file\n")
    return "".join(lines)


# --------------------------------------------------------------------------- fmt


def format_text(text: str, name: str, dialect: str | None = None) -> str:
    """The canonical text of a TVMScript source, in ``dialect`` (default: the input's).

    The result ends with a newline exactly when the input did. Raises TVMSError."""
    from .script import from_source
    from .script.dialect import detect_dialect

    node = from_source(text, name)
    out = node.script(dialect=dialect or detect_dialect(text).name)
    return out + "\n" if text.endswith("\n") else out


def cmd_fmt(args: argparse.Namespace) -> int:
    files = args.files or ["-"]
    if args.in_place and "-" in files:
        _error("--in-place cannot be used with standard input")
        return EXIT_ERROR

    failed = changed = False
    for path in files:
        try:
            name, text = read_source(path)
            formatted = format_text(text, name, args.dialect)
            if formatted != text:
                changed = True
            if args.check or args.diff:
                if formatted != text:
                    if args.diff:
                        sys.stdout.write(unified_diff(text, formatted, name))
                    if args.check:
                        print(f"would reformat {name}", file=sys.stderr)
            elif args.in_place:
                if formatted != text:
                    write_atomic(path, formatted)
            else:
                sys.stdout.write(formatted if formatted.endswith("\n") else formatted + "\n")
            sys.stdout.flush()
        except InputError as err:
            _error(str(err))
            failed = True
        except TVMSError as err:
            print(str(err), file=sys.stderr)
            failed = True
    if failed:
        return EXIT_ERROR
    if args.check and changed:
        return EXIT_CHANGED
    return EXIT_OK


def _add_fmt_parser(subparsers) -> None:
    from .script.dialect import DIALECTS

    p = subparsers.add_parser(
        "fmt",
        help="print TVMScript in canonical form",
        description=(
            "Parse TVMScript and print it back in canonical form. Without -i the result goes "
            "to standard output, followed by one newline. With -i the files are rewritten in "
            "place (atomically); a rewritten file ends with a newline exactly when the "
            "original did. Files are read as UTF-8."
        ),
    )
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="files to format; none or '-' reads standard input")
    p.add_argument("--check", action="store_true",
                   help="write nothing; report each file that would change as "
                        "'would reformat FILE' on stderr and exit 1 if any would")
    p.add_argument("--diff", action="store_true",
                   help="print a unified diff instead of the formatted text "
                        "(exit code as --check when combined with it, else 0)")
    p.add_argument("-i", "--in-place", action="store_true",
                   help="rewrite the files in place (not with standard input); "
                        "files already formatted are left alone")
    p.add_argument("--dialect", choices=sorted(DIALECTS),
                   help="dialect of the output (default: the dialect the input is written in)")
    p.set_defaults(func=cmd_fmt)


def _check_fmt_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.in_place and (args.check or args.diff):
        parser.error("fmt: -i/--in-place cannot be combined with --check or --diff")


# --------------------------------------------------------------------------- opt


def cmd_opt(args: argparse.Namespace) -> int:
    from .ir import IRModule
    from .lowering.instrument import PassTimingInstrument, PrintAfterAll, VerifyEachInstrument
    from .lowering.pass_registry import get_pass, list_passes, load_passes
    from .lowering.relax.pipeline import get_pipeline
    from .lowering.transform import PassContext, PassError
    from .script import from_source
    from .script.dialect import detect_dialect

    try:
        for path in args.load or []:
            load_passes(path)
    except TVMSError as err:
        _error(str(err))
        return EXIT_ERROR
    if args.list_passes:
        for name in list_passes():
            print(name)
        return EXIT_OK
    if not args.passes and not args.pipeline:
        _error("opt: name the passes to run with -p PASS[,PASS...] (see --list-passes) or a "
               "pipeline with --pipeline NAME")
        return EXIT_ERROR
    names = [n.strip() for n in args.passes.split(",")] if args.passes else []
    if any(not n for n in names):
        _error(f"opt: empty pass name in -p {args.passes!r}")
        return EXIT_ERROR
    try:
        passes = [get_pipeline(args.pipeline)] if args.pipeline else []
        passes += [get_pass(n) for n in names]
        name, text = read_source(args.input)
    except (InputError, TVMSError) as err:  # an unknown pass or an unreadable file
        _error(str(err))
        return EXIT_ERROR
    try:
        mod = from_source(text, name)
    except TVMSError as err:  # renders itself: file:line:col, the line, a caret
        print(str(err), file=sys.stderr)
        return EXIT_ERROR
    if not isinstance(mod, IRModule):
        _error(f"opt: {name} holds a bare function; passes need an @I.ir_module")
        return EXIT_ERROR
    dialect = args.dialect or detect_dialect(text).name

    instruments: list = []
    timing = PassTimingInstrument() if args.timing else None
    if args.print_after_all:
        instruments.append(PrintAfterAll(file=sys.stderr, dialect=dialect))
    if args.verify_each:
        instruments.append(VerifyEachInstrument())
    if timing is not None:
        instruments.append(timing)
    try:
        with PassContext(opt_level=args.opt_level, instruments=instruments):
            for p in passes:  # passes named on the command line run whatever their opt_level
                mod = p(mod)
        out = mod.script(dialect=dialect)
    except PassError as err:
        _error(str(err))
        return EXIT_PASS_FAILED
    finally:
        if timing is not None:
            print(timing.render(), file=sys.stderr)
    return emit_text(out, args.output)


def emit_text(out: str, output: str | None) -> int:
    """Write a command's result (with a final newline) to ``output`` atomically, or to stdout."""
    out = out if out.endswith("\n") else out + "\n"
    try:
        if output and output != "-":
            write_atomic(output, out)
        else:
            sys.stdout.write(out)
            sys.stdout.flush()
    except InputError as err:
        _error(str(err))
        return EXIT_ERROR
    return EXIT_OK


def module_command(subparsers, name: str, help: str, description: str, what: str) -> argparse.ArgumentParser:
    """A subcommand that reads one module (a file, or standard input) and writes one (to
    standard output, or atomically to -o FILE)."""
    p = subparsers.add_parser(name, help=help, description=description)
    p.add_argument("input", nargs="?", default="-", metavar="FILE",
                   help=f"the module to {what}; '-' or none reads standard input")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the result to FILE (atomically) instead of standard output")
    return p


def _add_opt_parser(subparsers) -> None:
    from .script.dialect import DIALECTS

    p = module_command(
        subparsers, "opt",
        help="run passes over a TVMScript module",
        description=(
            "Parse an @I.ir_module, run the named passes over it in order, and print the "
            "result (to standard output, or atomically to -o FILE). Passes come from the "
            "registry and from Python files given with --load, whose top-level "
            "@tvms.transform.module_pass classes and pass objects are registered by name. "
            "Exit codes: 0 success, 1 a pass failed, 2 usage or input error."
        ),
        what="transform",
    )
    p.add_argument("-p", "--passes", metavar="PASS[,PASS...]",
                   help="comma-separated pass names, run in this order")
    p.add_argument("--pipeline", metavar="NAME",
                   help="run a pre-built pipeline first (relax.get_pipeline: 'zero' is LegalizeOps, "
                        "AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR)")
    p.add_argument("--load", action="append", metavar="FILE.py",
                   help="import passes from a Python file (repeatable)")
    p.add_argument("--list-passes", action="store_true",
                   help="print the names of the known passes (after --load) and exit")
    p.add_argument("--print-after-all", action="store_true",
                   help="print the module to standard error after every pass")
    p.add_argument("--verify-each", action="store_true",
                   help="after every pass, check that the module prints and parses back "
                        "unchanged; a pass that breaks this fails")
    p.add_argument("--timing", action="store_true",
                   help="print the time each pass took to standard error")
    p.add_argument("--opt-level", type=int, default=2, metavar="N",
                   help="opt_level of the pass context the passes see (default 2)")
    p.add_argument("--dialect", choices=sorted(DIALECTS),
                   help="dialect of the output (default: the dialect the input is written in)")
    p.set_defaults(func=cmd_opt)


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="The tvms TVMScript toolchain.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_fmt_parser(subparsers)
    _add_opt_parser(subparsers)
    from .cli_schedule import add_schedule_parser
    add_schedule_parser(subparsers)
    from .cli_build import add_build_parsers
    add_build_parsers(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (``--help``/usage errors included)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "fmt":
            _check_fmt_args(parser, args)
    except SystemExit as exc:  # --help, --version and usage errors
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_ERROR)
    try:  # (on a thread with room for deep input: every subcommand's walks follow its nesting)
        return run_deep(args.func, args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``tvms fmt x | head``): stop quietly; point stdout at
        # devnull so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
