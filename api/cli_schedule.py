"""``tvms schedule``: apply a printed schedule trace to a module, or the default schedules.

Exit codes: 0 success, 1 a schedule primitive of the trace failed (the schedule error names the
block or loop), 2 a usage or input error (unreadable or unparsable module or trace).
"""
from __future__ import annotations

import argparse
import sys

from .cli import EXIT_ERROR, InputError, _error, emit_text, module_command, read_source
from .ir import TVMSError

EXIT_SCHEDULE_FAILED = 1


def cmd_schedule(args: argparse.Namespace) -> int:
    from .ir import IRModule
    from .ir.function import PrimFunc
    from .lowering.schedule import Schedule, ScheduleError
    from .lowering.schedule.replay import apply_trace_text
    from .script import from_source

    if (args.trace is None) == (not args.default):
        _error("schedule: give either --trace TRACE.py or --default")
        return EXIT_ERROR
    try:
        name, text = read_source(args.input)
        trace_name, trace_text = read_source(args.trace) if args.trace else ("", "")
    except InputError as err:
        _error(str(err))
        return EXIT_ERROR
    try:
        mod = from_source(text, name)
    except TVMSError as err:  # renders itself: file:line:col, the line, a caret
        print(str(err), file=sys.stderr)
        return EXIT_ERROR
    if not isinstance(mod, (IRModule, PrimFunc)):
        _error(f"schedule: {name} holds no TensorIR module or function")
        return EXIT_ERROR
    dialect = args.dialect or mod.source_dialect  # (a parsed module knows its dialect)
    if args.default:
        return _default_schedules(mod, args.target, dialect, args.output)
    sch = Schedule(mod, dialect=dialect)
    try:
        apply_trace_text(trace_text, sch, trace_name)
    except TVMSError as err:  # located in the trace: file:line:col, the line, a caret
        print(str(err), file=sys.stderr)
        # a primitive that failed on this module (1), or a trace that is not one (2)
        return EXIT_SCHEDULE_FAILED if isinstance(err, ScheduleError) else EXIT_ERROR
    if args.print_trace:
        print(sch.trace.script(dialect=dialect), file=sys.stderr)
    return emit_text(sch.mod.script(dialect=dialect), args.output)


def _default_schedules(mod, target: str, dialect: str, output: str | None) -> int:
    """The module with every unscheduled PrimFunc given the default schedule of its kind, as
    ``tvms.compile`` gives it (``tvms.dlight.cpu``: matmul, GEMV, reduction, elementwise, fallback)."""
    from .ir import IRModule
    from .lowering.build import default_schedules

    try:
        mod = default_schedules(mod if isinstance(mod, IRModule) else IRModule({"main": mod}), target)
    except TVMSError as err:
        _error(f"schedule: {err}")
        return EXIT_SCHEDULE_FAILED
    return emit_text(mod.script(dialect=dialect), output)


def add_schedule_parser(subparsers) -> None:
    from .script.dialect import DIALECTS

    p = module_command(
        subparsers, "schedule",
        help="apply a schedule trace to a TensorIR module",
        description=(
            "Parse a module, replay the schedule trace of TRACE.py on it (the Python that "
            "print(sch.trace) shows, in either dialect), or with --default give each "
            "unscheduled function its default schedule, and print the scheduled module (to "
            "standard output, or atomically to -o FILE). Exit codes: 0 success, 1 a schedule "
            "primitive failed, 2 usage or input error."
        ),
        what="schedule",
    )
    p.add_argument("--trace", metavar="TRACE.py", help="the trace to apply")
    p.add_argument("--default", action="store_true",
                   help="instead of a trace, give each unscheduled function its default schedule "
                        "for --target (tvms.dlight.cpu rules)")
    p.add_argument("--target", default="llvm", help="the target of --default (default: llvm)")
    p.add_argument("--print-trace", action="store_true",
                   help="print the trace that was applied to standard error")
    p.add_argument("--dialect", choices=sorted(DIALECTS),
                   help="dialect of the output and trace (default: the dialect of the input)")
    p.set_defaults(func=cmd_schedule)
