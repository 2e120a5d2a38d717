"""What a person sees of a tuning run: a live display, the logs, the final table, the curve.

``Progress`` watches a ``TaskScheduler``: trials done out of the budget, builds and measurements in
flight, the best latency and GFLOPS of each task, elapsed time and an estimate of what is left.
On a terminal it is live, drawn with ``rich`` when installed (a table redrawn in place), else
with ``tqdm`` (a bar; tqdm is the dependency: one pure-Python package with nothing under it, which
also draws in notebooks), else with a status line. Elsewhere (a log file, CI) it writes one plain
line every ``every`` trials. At the end it prints the per-task table as TVM prints it and writes
it to ``work_dir/logs/task_scheduler.log``; each task logs its trials to
``work_dir/logs/task_<i>_<name>.log``. ``write_curve`` draws best GFLOPS against trials as SVG
(written directly, no plotting library) or PNG (with matplotlib, if installed).
"""
from __future__ import annotations

import io
import logging
import os
import sys
import time
from typing import Any, TextIO

from ...ir.errors import TVMSError
from ...ir.files import WriteError, write_file

_LOGGER_PREFIX = "tvms.meta_schedule.task"
_DISPLAYS = ("auto", "rich", "tqdm", "line", "plain", "none")


# --------------------------------------------------------------------------- the table


def _table(rows: list) -> str:
    """Rows of cells (None: a separator line) as TVM's table printer lays them out: each cell
    right-aligned in its column with a space either side, columns joined by ``|``."""
    widths = [max(len(r[i]) for r in rows if r and i < len(r)) for i in range(max(len(r or ()) for r in rows))]
    total = sum(widths) + 3 * len(widths) - 1
    return "\n".join("-" * total if not row else
                     "|".join(" " * (w + 1 - len(c)) + c + " " for w, c in zip(widths, row)) for row in rows)


def tuning_statistics(scheduler: Any) -> str:
    """TVM's per-task table (ID, Name, FLOP, Weight, Speed (GFLOPS), Latency (us), Weighted
    Latency (us), Trials, Done) and its totals."""
    rows: list = [["ID", "Name", "FLOP", "Weight", "Speed (GFLOPS)", "Latency (us)",
                   "Weighted Latency (us)", "Trials", "Done"], None]
    total_trials, total_latency = 0, 0.0
    for i, task in enumerate(scheduler.tasks_):
        row = [str(i), task.ctx.task_name, str(int(task.flop)), str(int(task.task_weight))]
        if task.gflops is None:
            row += ["N/A", "N/A", "N/A"]
        else:
            us = task.best_ms * 1e3
            row += [f"{task.gflops:.4f}", f"{us:.4f}", f"{us * task.task_weight:.4f}"]
            total_latency += us * task.task_weight
            total_trials += len(task.latency_ms)
        rows.append(row + [str(len(task.latency_ms)), "Y" if task.is_terminated else ""])
    rows.append(None)
    return f"{_table(rows)}\n\nTotal trials: {total_trials}\nTotal latency (us): {total_latency:.4f}\n"


# --------------------------------------------------------------------------- logs


def task_loggers(work_dir: str, task_names: list) -> list[logging.Logger]:
    """One logger per task writing to ``work_dir/logs/task_<i>_<name>.log`` (appending: a resumed
    run continues the same log)."""
    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    loggers = []
    for i, name in enumerate(task_names):
        safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in name)
        path = os.path.abspath(os.path.join(log_dir, f"task_{i}_{safe}.log"))
        logger = logging.getLogger(f"{_LOGGER_PREFIX}.{path}")
        close_loggers([logger])
        handler = logging.FileHandler(path, mode="a", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        loggers.append(logger)
    return loggers


def close_loggers(loggers: list) -> None:
    for logger in loggers:
        if isinstance(logger, logging.Logger):
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
                handler.close()


# --------------------------------------------------------------------------- the curve


def write_curve(path: str, curve: list) -> None:
    """Best GFLOPS against trials, one line per task. ``curve``: ``(trials, task_name, gflops)``
    points in trial order. ``.svg`` is written directly, ``.png`` needs matplotlib."""
    check_curve_path(path)
    series: dict = {}
    for trials, name, gflops in curve:
        series.setdefault(name, []).append((trials, gflops))
    if path.lower().endswith(".png"):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for name, points in series.items():
            ax.step([p[0] for p in points], [p[1] for p in points], where="post", label=name)
        ax.set_xlabel("trials")
        ax.set_ylabel("best GFLOPS")
        ax.legend()
        image = io.BytesIO()
        fig.savefig(image, format="png", dpi=100)
        plt.close(fig)
        data = image.getvalue()
    else:
        data = _svg(series).encode()
    try:
        write_file(path, data)  # atomic
    except WriteError as err:
        raise TVMSError(f"cannot write the tuning curve: {err}") from None


def check_display(display: str) -> None:
    """Refuse a display whose package is not installed (rich is optional)."""
    if display in ("rich", "tqdm") and not _importable(display):
        raise TVMSError(f"the {display} progress display needs the {display} package (pip install "
                        f"{display}); display='line' or 'plain' need nothing")


def check_curve_path(path: str) -> None:
    """Refuse, before any tuning, a curve path ``write_curve`` could not write: a suffix other
    than .svg/.png, a PNG without matplotlib, a folder that does not exist."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".svg", ".png"):
        raise TVMSError(f"a tuning curve is written as .svg or .png, not {path!r}")
    if suffix == ".png" and not _importable("matplotlib"):
        raise TVMSError(f"writing {path}: a PNG curve needs matplotlib; write an .svg instead")
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise TVMSError(f"cannot write the tuning curve {path}: its folder does not exist")


def _svg(series: dict) -> str:
    w, h, m = 640, 400, 50
    xmax = max((p[0] for pts in series.values() for p in pts), default=1) or 1
    ymax = max((p[1] for pts in series.values() for p in pts), default=1) or 1
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]

    def xy(x: float, y: float) -> str:
        return f"{m + x / xmax * (w - 2 * m):.1f},{h - m - y / ymax * (h - 2 * m):.1f}"

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
           f'font-size="12"><rect width="{w}" height="{h}" fill="white"/>',
           f'<path d="M{xy(0, ymax)} L{xy(0, 0)} L{xy(xmax, 0)}" fill="none" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">trials (0-{xmax})</text>',
           f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">'
           f'best GFLOPS (0-{ymax:.2f})</text>']
    for k, (name, points) in enumerate(series.items()):
        steps = [xy(*points[0])] + [s for (x0, y0), (x1, y1) in zip(points, points[1:]) for s in (xy(x1, y0), xy(x1, y1))]
        color = colors[k % len(colors)]
        out.append(f'<polyline points="{" ".join(steps)}" fill="none" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{m + 10}" y="{m + 16 * k}" fill="{color}">{_escape(name)}</text>')
    return "\n".join(out + ["</svg>\n"])


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --------------------------------------------------------------------------- the live display


def _duration(secs: float) -> str:
    secs = int(secs)
    return f"{secs // 3600}:{secs // 60 % 60:02d}:{secs % 60:02d}" if secs >= 3600 else f"{secs // 60}:{secs % 60:02d}"


class Progress:
    """The live view of a tuning run (see the module's docstring).

    ``stream``: where it draws (standard error); ``every``: trials between two plain lines;
    ``display``: "auto" (rich, tqdm, then a status "line" on a terminal; "plain" lines
    elsewhere), or one of them, or "none"; ``work_dir``: where the final table is logged.
    """

    def __init__(self, stream: TextIO | None = None, every: int = 16, display: str = "auto",
                 work_dir: str | None = None) -> None:
        if display not in _DISPLAYS:
            raise TVMSError(f"unknown progress display {display!r}; known: {', '.join(_DISPLAYS)}")
        self.stream = stream if stream is not None else sys.stderr
        self.every, self.display, self.work_dir = max(1, int(every)), display, work_dir
        self.curve: list = []  # (trials done, task name, best GFLOPS of that task)
        self._mode, self._view = "none", None  # how it draws now, and what draws (rich, tqdm)

    # -- events from the scheduler
    def start(self, scheduler: Any, budget: int, done_before: int) -> None:
        self.scheduler, self.budget = scheduler, budget
        self.trials = self.done_before = done_before
        self.building_, self.running_ = 0, 0
        self.t0 = time.monotonic()
        self._mode, self._view = self._open_view()
        self._draw()

    def building(self, task_id: int, n: int) -> None:
        self.building_ += n
        self._draw()

    def built(self, task_id: int, n: int, n_ok: int) -> None:
        self.building_ -= n
        self.running_ += n_ok
        self._draw()

    def trial(self, scheduler: Any, task_id: int, ran: bool) -> None:
        """One trial of the task was joined; ``ran``: it was built and sent to the runner."""
        self.trials += 1
        self.running_ -= ran
        task = scheduler.tasks_[task_id]
        if task.gflops is not None:
            self.curve.append((self.trials, task.ctx.task_name, task.gflops))
        if self._mode == "plain":
            if (self.trials - self.done_before) % self.every == 0 or self.trials >= self.budget:
                print(self.status(), file=self.stream, flush=True)
        else:
            self._draw()

    def finish(self, scheduler: Any) -> None:
        self._close_view()
        table = tuning_statistics(scheduler)
        if self.display != "none":
            print(table, file=self.stream, flush=True)
        if self.work_dir is not None:
            os.makedirs(os.path.join(self.work_dir, "logs"), exist_ok=True)
            with open(os.path.join(self.work_dir, "logs", "task_scheduler.log"), "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} tuning finished after "
                        f"{_duration(time.monotonic() - self.t0)}\n{table}\n")

    # -- what is shown
    def status(self) -> str:
        """One line: trials, in flight, elapsed, left, and the best of each task."""
        elapsed = time.monotonic() - self.t0
        done_now = self.trials - self.done_before
        eta = elapsed / done_now * max(0, self.budget - self.trials) if done_now else None
        best = ", ".join(f"{t.ctx.task_name} {t.best_ms * 1e3:.1f} us {t.gflops:.2f} GFLOPS"
                         for t in self.scheduler.tasks_ if t.gflops is not None)
        return (f"trials {self.trials}/{self.budget} | building {self.building_} running {self.running_} | "
                f"elapsed {_duration(elapsed)} left {'?' if eta is None else _duration(eta)}"
                + (f" | best: {best}" if best else ""))

    def _rich_table(self) -> Any:
        from rich.table import Table

        table = Table(title=self.status().split(" | best")[0], title_justify="left")
        for col in ("ID", "Name", "Trials", "Best latency (us)", "GFLOPS", "Done"):
            table.add_column(col, justify="right" if col not in ("Name",) else "left")
        for i, t in enumerate(self.scheduler.tasks_):
            table.add_row(str(i), t.ctx.task_name, str(len(t.latency_ms)),
                          "-" if t.gflops is None else f"{t.best_ms * 1e3:.1f}",
                          "-" if t.gflops is None else f"{t.gflops:.2f}", "Y" if t.is_terminated else "")
        return table

    def _open_view(self) -> tuple[str, Any]:
        """The drawing mode and, for rich and tqdm, the object that draws."""
        mode = self.display
        if mode == "auto":
            if not getattr(self.stream, "isatty", lambda: False)():
                return "plain", None
            mode = next((m for m in ("rich", "tqdm") if _importable(m)), "line")
        check_display(mode)
        if mode == "rich":
            from rich.console import Console
            from rich.live import Live

            live = Live(self._rich_table(), console=Console(file=self.stream), refresh_per_second=4)
            live.start()
            return mode, live
        if mode == "tqdm":
            from tqdm import tqdm

            return mode, tqdm(total=self.budget, initial=self.trials, file=self.stream, unit="trial",
                              dynamic_ncols=True)
        return mode, None

    def _draw(self) -> None:
        mode, view = self._mode, self._view
        if mode == "line":
            print("\r" + self.status(), end="", file=self.stream, flush=True)
        elif mode == "tqdm":
            view.update(self.trials - view.n)
            view.set_postfix_str(self.status().split(" | ", 1)[1], refresh=True)
        elif mode == "rich":
            view.update(self._rich_table())

    def _close_view(self) -> None:
        if self._mode == "line":
            print(file=self.stream)
        elif self._mode == "tqdm":
            self._view.close()
        elif self._mode == "rich":
            self._view.stop()
        self._mode, self._view = "none", None


def _importable(name: str) -> bool:
    try:
        __import__(name)
        return True
    except ImportError:
        return False
