"""The command-line application every command module registers on, its shared options, and what
every command shares: progress on a terminal or as plain lines, tables, Ctrl-C / SIGTERM, and the one
error line with exit status 2."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichBar
from rich.table import Table as RichTable

from fedloom.errors import FedloomError

# a crash prints its traceback without local variables: they hold data rows and the full config
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    help="Run one method, compare several, evaluate a finished run again, inspect config and methods.",
)
data_app = typer.Typer(
    no_args_is_help=True,
    help="Datasets: what is available where, and what one holds.",
    pretty_exceptions_show_locals=False,
)
app.add_typer(data_app, name="data")
console = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="override: key=value (repeatable)")]
MethodOpt = Annotated[str | None, typer.Option(help="federated method")]
DatasetOpt = Annotated[str | None, typer.Option(help="dataset name")]
BackboneOpt = Annotated[str | None, typer.Option(help="backbone name or path")]
RoundsOpt = Annotated[int | None, typer.Option(help="communication rounds")]
SeedOpt = Annotated[int | None, typer.Option(help="training seed")]
OverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="delete what an existing run directory holds before running")
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="real datasets folder (default $FEDLOOM_DATA_DIR, else ../shared/data)"),
]
TrackOpt = Annotated[str | None, typer.Option(help="also log the finished run to a tracker: mlflow")]
TrackUriOpt = Annotated[str | None, typer.Option(help="tracking URI (default: a local store under ./mlruns)")]


def with_data_dir(overrides: list[str] | None, data_dir: Path | None) -> list[str]:
    return [*(overrides or []), *([f"data.data_dir={data_dir}"] if data_dir is not None else [])]


class RichProgress:
    """`fedloom.progress.Progress` on a rich live display."""

    def __init__(self, bar: RichBar) -> None:
        self.bar = bar

    def task(self, description: str, total: int):  # noqa: ANN201
        task_id = self.bar.add_task(description, total=total)
        done = [0]

        def advance(n: int) -> None:
            done[0] += n
            self.bar.advance(task_id, n)
            if done[0] >= total:
                self.bar.remove_task(task_id)

        return advance


@contextmanager
def progress() -> Iterator[Any]:
    if not console.is_terminal:  # a log file or a pipe: a plain line per round instead of a live bar
        from fedloom.progress import LineProgress

        yield LineProgress(lambda line: console.print(line, highlight=False, soft_wrap=True))
        return
    bar = RichBar(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    with bar:
        yield RichProgress(bar)


def print_table(header: list[str], rows: list[list[str]], title: str) -> None:
    table = RichTable(title=title)
    for h in header:
        table.add_column(h)
    for r in rows:
        table.add_row(*(c.replace("**", "") for c in r))
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def print_run(summary: dict[str, Any], where: str) -> None:
    """A finished run's client table (test, at the round chosen on validation) and its folder."""
    from fedloom.runs.report import client_table

    best = summary["selection"]["best_round"]
    title = f"{summary['method']} {where} — test, round {best} (best on val)"
    print_table(*client_table(summary), title=title)
    if "cross_section" in summary:
        pooled = ", ".join(f"{k} {v:+.4f}" for k, v in summary["cross_section"].items())
        console.print(f"test, one cross-section of every client's stocks per day: {pooled}")
    console.print(f"run directory: {summary['run_dir']}")


def interruptible() -> None:
    """SIGINT and SIGTERM stop the command as Ctrl-C does (KeyboardInterrupt → exit 130, runs keep their
    last checkpoint), also when it was started in the background, where the shell ignores SIGINT."""
    import signal

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, stop)


def log_to_tracker(tracker: str | None, uri: str | None, run_dirs: list[Path]) -> None:
    """Log finished run directories to the tracker named by ``--track`` (none: nothing)."""
    if tracker is None:
        return
    from fedloom.results.tracking import log_run

    for run_dir in run_dirs:
        console.print(f"{tracker}: {run_dir} logged as run {log_run(run_dir, uri)}")


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        code = app(standalone_mode=False)  # without standalone mode, click returns typer.Exit's code
    except FedloomError as exc:
        console.print(f"[red]error:[/red] {exc}", soft_wrap=True, highlight=False)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        console.print("aborted")
        sys.exit(130)
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    if isinstance(code, int) and code:
        sys.exit(code)
