"""Commands that read runs: ``fedloom table`` and ``fedloom report`` (`fedloom.results`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedloom.cli.app import app, console


@app.command()
def table(
    paths: Annotated[list[Path], typer.Argument(help="run directories, or folders holding them (a suite's)")],
    reference: Annotated[
        str | None,
        typer.Option(help="row the bootstrap compares every other row with; '{row}-fixed': each row with its twin"),
    ] = None,
    daily: Annotated[str | None, typer.Option(help="daily.csv column compared (default: the primary metric)")] = None,
    final: Annotated[bool, typer.Option(help="bootstrap the final-round models' series (daily_final.csv)")] = False,
    column: Annotated[list[str] | None, typer.Option(help="extra column LABEL=dotted.path (repeatable)")] = None,
    evaluations: Annotated[bool, typer.Option(help="re-evaluations (RUN/evaluations/) as rows")] = False,
    csv: Annotated[Path | None, typer.Option(help="also write the numbers as CSV")] = None,
    latex: Annotated[Path | None, typer.Option(help="also write a booktabs LaTeX table")] = None,
) -> None:
    """Mean ± std over seeds per row (method / switch set), best cells, bootstrap against a reference row."""
    from fedloom.results.load import find_runs
    from fedloom.results.render import to_csv, to_latex, to_markdown
    from fedloom.results.table import build_tables, default_columns, parse_column

    runs = find_runs(paths, evaluations, final)
    extra = [parse_column(c) for c in column or []]
    columns = [*default_columns(runs[0].record), *extra] if extra else None
    tables = build_tables(runs, columns, reference, daily)
    typer.echo(to_markdown(tables), nl=False)
    for path, text in ((csv, to_csv(tables)), (latex, to_latex(tables))):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            console.print(f"written: {path}")


@app.command()
def report(
    path: Annotated[Path, typer.Argument(help="a run directory, or a folder holding runs (a comparison, a suite)")],
    out: Annotated[Path | None, typer.Option(help="folder for report.html and figures/ (default: PATH)")] = None,
    reference: Annotated[
        str | None, typer.Option(help="row the table's bootstrap and gain plot compare with (or a '{row}-…' template)")
    ] = None,
) -> None:
    """One static HTML page (report.html + PNG figures) of a run or of a folder of runs."""
    from fedloom.results.page import write_report

    console.print(f"written: {write_report(path, out, reference)}")
