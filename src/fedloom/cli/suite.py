"""``fedloom suite``: a grid of runs, as `fedloom run` subprocesses (`fedloom.suites`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichBar

from fedloom.cli.app import (
    DataDirOpt,
    SetOpt,
    TrackOpt,
    TrackUriOpt,
    app,
    console,
    interruptible,
    print_table,
    with_data_dir,
)

if TYPE_CHECKING:
    from fedloom.suites.runner import SuiteState
    from fedloom.suites.spec import Job


@app.command()
def suite(
    file: Annotated[Path, typer.Argument(help="suite YAML (configs/suites/)")],
    out: Annotated[Path | None, typer.Option(help="suite directory (default runs/suites/<name>)")] = None,
    workers: Annotated[int, typer.Option(min=1, help="jobs at once, each pinned to its share of the cores")] = 1,
    dry_run: Annotated[bool, typer.Option(help="list the jobs, their state and estimated time; run nothing")] = False,
    only: Annotated[
        list[str] | None,
        typer.Option(
            help="only the jobs whose folder matches this shell pattern, e.g. 'synthetic/rpa/*' (repeatable)"
        ),
    ] = None,
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
    track: TrackOpt = None,
    track_uri: TrackUriOpt = None,
) -> None:
    """Run a grid of methods × seeds × switch sets × datasets; rerun the same command to continue."""
    from fedloom.results.tracking import check_tracker
    from fedloom.suites.runner import SuiteRunner, estimate, job_status, measured_seconds
    from fedloom.suites.spec import load_suite, select_jobs

    check_tracker(track)
    spec = select_jobs(load_suite(file, with_data_dir(set_, data_dir)), only or [])
    suite_dir = out or Path("runs/suites") / spec.config.name
    if dry_run:
        times = measured_seconds(suite_dir)
        rows, total = [], 0.0
        for job in spec.jobs:
            seconds = estimate(job, times, spec.jobs)
            status = job_status(job, suite_dir)
            if status != "finished":
                total += seconds or 0.0
            rows.append([job.folder, job.label.row, status, "–" if seconds is None else f"{seconds:.0f}"])
        print_table(
            ["job", "row", "state", "est. s"], rows, f"suite {spec.config.name}: {len(rows)} jobs in {suite_dir}"
        )
        if times:
            console.print(f"estimated: {total / workers / 60:.1f} min of work left with {workers} worker(s)")
        return

    interruptible()
    with _suite_display(spec.config.name, len(spec.jobs)) as (on_event, on_tick):
        tracking = [*(["--track", track] if track else []), *(["--track-uri", track_uri] if track_uri else [])]
        state = SuiteRunner(spec, suite_dir, workers, on_event, on_tick, job_args=tracking).run()
    summary = f"{state.done} of {state.total} jobs finished, {len(state.failed)} failed"
    console.print(f"suite {spec.config.name}: {summary} (errors: {suite_dir / 'suite.jsonl'}); "
                  f"table: fedloom table {suite_dir}", soft_wrap=True)  # fmt: skip
    if state.failed:
        raise typer.Exit(1)


@contextmanager
def _suite_display(name: str, total: int) -> Iterator[Any]:
    """One live line for the suite (done / running / failed, ETA) and a printed line per job event,
    which is all that shows when the output is not a terminal."""
    bar = RichBar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True)  # fmt: skip
    task = bar.add_task(name, total=total)

    def on_tick(state: SuiteState) -> None:
        eta = state.eta(time.monotonic())
        left = "ETA –" if eta is None else f"ETA {eta / 60:.0f} min"
        text = f"{name}: {len(state.running)} running, {len(state.failed)} failed, {left}"
        bar.update(task, completed=state.done + len(state.failed), description=text)

    def on_event(event: str, job: Job, state: SuiteState, detail: str) -> None:
        console.print(f"{event:11s} {job.folder} ({job.label.row}) {detail}".rstrip(), highlight=False)
        on_tick(state)

    with bar:
        yield on_event, on_tick
