"""Commands that describe, run nothing: ``fedloom methods``, ``config``, ``data list`` and ``data info``."""

from __future__ import annotations

from typing import Annotated

import typer

from fedloom.cli.app import ConfigOpt, DataDirOpt, SetOpt, app, data_app, print_table, with_data_dir


@app.command()
def methods() -> None:
    """List the available federated methods and structured references."""
    from fedloom.algorithms.registry import METHODS
    from fedloom.references.registry import REFERENCES

    for name, method in sorted(METHODS.items()):
        typer.echo(f"{name:12s} {method.summary}")
    for name, reference in sorted(REFERENCES.items()):
        typer.echo(f"{name:12s} {reference.summary}")


@app.command("config")
def show_config(config: ConfigOpt = None, set_: SetOpt = None) -> None:
    """Print the fully resolved configuration (defaults, file and overrides)."""
    from fedloom.runs.config import dump_config, load_config

    typer.echo(dump_config(load_config(config, None, set_)), nl=False)


@data_app.command("list")
def data_list(config: ConfigOpt = None, data_dir: DataDirOpt = None, set_: SetOpt = None) -> None:
    """List every dataset name, its kind, and whether its files are in the data folder."""
    from fedloom.data.files import resolve_data_dir
    from fedloom.data.summary import availability
    from fedloom.runs.config import load_config

    cfg = load_config(config, None, with_data_dir(set_, data_dir)).data
    rows = availability(cfg)
    print_table(
        ["name", "kind", "folder", "status", "summary"],
        [list(r.values()) for r in rows],
        title=f"datasets in {resolve_data_dir(cfg.data_dir) or '(no data folder)'}",
    )


@data_app.command("info")
def data_info(
    name: Annotated[str, typer.Argument(help="dataset name (see fedloom data list)")],
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
) -> None:
    """Load one dataset as `fedloom run` would and print rows, dates, splits, clients and label balance."""
    from fedloom.data.registry import load_dataset
    from fedloom.data.summary import describe
    from fedloom.runs.config import load_config

    cfg = load_config(config, {"dataset": name}, with_data_dir(set_, data_dir))
    table = load_dataset(cfg.dataset, cfg.data)
    print_table(["field", "value"], [list(r) for r in describe(table, cfg.data)], title=f"{name}")
