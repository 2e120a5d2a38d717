"""The ``tvms`` command line tool.

``main(argv)`` parses the arguments and dispatches to one function per subcommand
(``cmd_fmt``, ...); each returns the process exit code. To add a subcommand, write
``_add_<name>_parser(subparsers)`` (which sets ``func=cmd_<name>``) and ``cmd_<name>(args)``,
and call the former from ``build_parser``.

Exit codes, the same for every subcommand (the README's table):
0 done; 1 the requested operation failed (a pass, a schedule primitive, compiling, running the
program, a ``--check`` difference); 2 usage or input error (an unreadable or unparsable file, a bad
argument or target, a write that cannot happen); 70 an internal error (a bug in tvms: any exception
that is not a TVMSError, reported in one line; ``TVMS_TRACEBACK=1`` shows its traceback);
130 interrupted.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
from typing import Any, Sequence

from . import __version__
from .ir import TVMSError
from .ir.deep import run_deep

PROG = "tvms"
STDIN_NAME = "<stdin>"

EXIT_OK = 0
EXIT_FAILED = 1  # the requested operation failed
EXIT_CHANGED = EXIT_FAILED
EXIT_PASS_FAILED = EXIT_FAILED
EXIT_ERROR = 2
EXIT_INTERNAL = 70  # (EX_SOFTWARE in BSD's sysexits.h)
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
    """Write ``text`` (UTF-8) to ``path`` with tvms.ir.files.write_file (atomic for a regular
    file, written through for a device or a FIFO). Raises InputError."""
    from .ir.files import WriteError, write_file

    try:
        write_file(path, text.encode("utf-8"))
    except WriteError as err:
        raise InputError(str(err)) from None


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


def format_text(text: str, name: str, dialect: str | None = None, verify: bool = False) -> str:
    """The canonical text of a TVMScript source, in ``dialect`` (default: the input's); for a
    ``.py`` file, the file with only its TVMScript definitions formatted. ``verify`` (before a
    write): refuse a text that does not parse back to the same IR. Raises TVMSError."""
    from .script.formatting import format_python, format_script

    fmt = format_python if name.endswith(".py") else format_script
    return fmt(text, name, dialect, verify)


def cmd_fmt(args: argparse.Namespace) -> int:
    files = args.files or ["-"]
    if args.in_place and "-" in files:
        _error("--in-place cannot be used with standard input")
        return EXIT_ERROR
    if args.output and len(files) != 1:
        _error("fmt: -o/--output takes one input file")
        return EXIT_ERROR

    failed = changed = False
    for path in files:
        try:
            name, text = read_source(path)
            writes = args.in_place or bool(args.output and args.output != "-")
            formatted = format_text(text, name, args.dialect, writes)
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
            elif writes:
                write_atomic(args.output, formatted if formatted.endswith("\n") else formatted + "\n")
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
            "original did. In a .py file only the @I.ir_module, @T.prim_func and @R.function "
            "definitions are formatted; every other line stays as it is. Before -i or -o writes, "
            "the formatted text is parsed back and must give the same IR. Files are read as UTF-8."
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
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the formatted text of the one input FILE to FILE (atomically)")
    p.add_argument("--dialect", choices=sorted(DIALECTS),
                   help="dialect of the output (default: the dialect the input is written in)")
    p.set_defaults(func=cmd_fmt)


def _check_fmt_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if (args.in_place or args.output) and (args.check or args.diff):
        parser.error("fmt: -i/--in-place and -o/--output cannot be combined with --check or --diff")
    if args.in_place and args.output:
        parser.error("fmt: -i/--in-place and -o/--output exclude each other")


# --------------------------------------------------------------------------- opt


def cmd_opt(args: argparse.Namespace) -> int:
    from .ir import IRModule
    from .lowering.instrument import PassTimingInstrument, PrintAfterAll, VerifyEachInstrument
    from .lowering.pass_registry import get_pass, list_passes, load_passes
    from .lowering.relax.pipeline import get_pipeline
    from .lowering.transform import PassContext, PassError
    from .script import from_source

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
    dialect = args.dialect or mod.source_dialect  # (a parsed module knows its dialect)
    bare = not isinstance(mod, IRModule)
    if bare:  # (a lone function: in a module of its own, as IRModule.from_expr puts it)
        mod = IRModule({str(mod.attrs.get("global_symbol", "main")): mod})

    instruments: list = []
    timing = PassTimingInstrument() if args.timing else None
    if args.print_after_all:
        instruments.append(PrintAfterAll(file=sys.stderr, dialect=dialect))
    if args.verify_each:
        instruments.append(VerifyEachInstrument())
    if timing is not None:
        instruments.append(timing)
    try:
        database = _open_database(args.database)
    except TVMSError as err:
        _error(f"opt: {err}")
        return EXIT_ERROR
    try:
        with PassContext(opt_level=args.opt_level, instruments=instruments, config=args.pass_config), database:
            for p in passes:  # passes named on the command line run whatever their opt_level
                mod = p(mod)
        functions = list(mod.functions.values())
        # (a lone function comes back alone while the passes leave it alone in its module)
        out = (functions[0] if bare and len(functions) == 1 else mod).script(dialect=dialect)
    except PassError as err:
        _error(str(err))
        return EXIT_PASS_FAILED
    except TVMSError as err:  # a pass (or printing its result) refused the module
        _error(f"opt: {err}")
        return EXIT_PASS_FAILED
    finally:
        if timing is not None:
            print(timing.render(), file=sys.stderr)
    return emit_text(out, args.output)


def _open_database(work_dir: str | None) -> Any:
    """The tuning database of ``--database DIR`` (what MetaScheduleApplyDatabase reads), or a
    context that does nothing."""
    if work_dir is None:
        return contextlib.nullcontext()
    if not os.path.isfile(os.path.join(work_dir, "database_tuning_record.json")):
        raise TVMSError(f"--database {work_dir}: no tuning database there (database_tuning_record.json)")
    from .lowering.tune.tune import make_part

    return make_part("database", "json", work_dir=work_dir)


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
    p.add_argument("--database", metavar="DIR",
                   help="the tuning database (a tvms tune --work-dir) that MetaScheduleApplyDatabase applies")
    p.add_argument("--opt-level", type=int, default=2, metavar="N",
                   help="opt_level of the pass context the passes see (default 2)")
    p.add_argument("--dialect", choices=sorted(DIALECTS),
                   help="dialect of the output (default: the dialect the input is written in)")
    add_pass_config_flag(p)
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
    from .cli_tune import add_tune_parser
    add_tune_parser(subparsers)
    from .cli_import import add_import_parser
    add_import_parser(subparsers)
    return parser


def add_pass_config_flag(parser: argparse.ArgumentParser) -> None:
    """``--pass-config KEY=VALUE`` (tvmc's flag): the command runs under a PassContext with it."""
    parser.add_argument("--pass-config", action="append", metavar="KEY=VALUE",
                        help="a PassContext option for the passes and the compiler (repeatable), e.g. "
                             "tirx.use_async_copy=1 for cp.async copies on the GPU; "
                             "tvms.transform.PassContext.list_configs() lists them")


def _pass_context(args: argparse.Namespace) -> Any:
    """The PassContext a command runs under: one with its ``--pass-config`` options (their dict
    replaces the flag's list in ``args``), or a context that does nothing."""
    if not hasattr(args, "pass_config"):
        return contextlib.nullcontext()
    from .lowering.pass_config import parse_pass_configs
    from .lowering.transform import PassContext

    args.pass_config = parse_pass_configs(args.pass_config)
    return PassContext(config=args.pass_config) if args.pass_config else contextlib.nullcontext()


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
    try:
        context = _pass_context(args)
    except TVMSError as err:
        _error(str(err))
        return EXIT_ERROR
    try:  # (on a thread with room for deep input: every subcommand's walks follow its nesting)
        with context:
            if getattr(args, "main_thread", False):  # tvms tune: Ctrl-C must reach the tuning loop
                return args.func(args)
            return run_deep(args.func, args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except TVMSError as err:  # (subcommands report input errors themselves, before the operation)
        print(str(err), file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader went away (``tvms fmt x | head``): stop quietly; point stdout at
        # devnull so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as err:  # a bug: one line, not a traceback (set TVMS_TRACEBACK=1 for it)
        if os.environ.get("TVMS_TRACEBACK"):
            raise
        detail = f"{type(err).__name__}: {err}".splitlines()[0]
        print(f"{PROG}: internal error: {detail} (a bug in tvms: please report it with the command "
              "and its input; TVMS_TRACEBACK=1 shows the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
