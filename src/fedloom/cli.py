"""``fedloom`` command line: run one method, compare several, evaluate a finished run again, inspect
config and methods."""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichBar
from rich.table import Table

from fedloom.errors import FedloomError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
console = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="override: key=value (repeatable)")]
MethodOpt = Annotated[str | None, typer.Option(help="federated method")]
DatasetOpt = Annotated[str | None, typer.Option(help="dataset name")]
BackboneOpt = Annotated[str | None, typer.Option(help="backbone name or path")]
RoundsOpt = Annotated[int | None, typer.Option(help="communication rounds")]
SeedOpt = Annotated[int | None, typer.Option(help="training seed")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="real datasets folder (default $FEDLOOM_DATA_DIR, else ../shared/data)"),
]

data_app = typer.Typer(no_args_is_help=True, help="Datasets: what is available where, and what one holds.")
app.add_typer(data_app, name="data")


def _with_data_dir(overrides: list[str] | None, data_dir: Path | None) -> list[str]:
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
def _progress():
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


def _print_table(header: list[str], rows: list[list[str]], title: str) -> None:
    table = Table(title=title)
    for h in header:
        table.add_column(h)
    for r in rows:
        table.add_row(*(c.replace("**", "") for c in r))
    Console(width=None if sys.stdout.isatty() else 160).print(table)


@app.command()
def run(
    config: ConfigOpt = None,
    method: MethodOpt = None,
    dataset: DatasetOpt = None,
    backbone: BackboneOpt = None,
    rounds: RoundsOpt = None,
    seed: SeedOpt = None,
    out: Annotated[Path, typer.Option(help="run directory")] = Path("runs/latest"),
    resume: Annotated[
        Path | None, typer.Option(help="continue the run in this directory from its newest checkpoint")
    ] = None,
    init_adapter: Annotated[
        Path | None, typer.Option(help="start from this PEFT LoRA adapter (sets adapter.init_from)")
    ] = None,
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run one federated experiment and write its run directory."""
    from fedloom.errors import ConfigError
    from fedloom.experiments.config import load_config
    from fedloom.experiments.report import client_table
    from fedloom.experiments.run import run_method
    from fedloom.experiments.workspace import prepare_workspace

    flags = {"method": method, "dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    if resume is not None:
        if config is not None:
            raise ConfigError("--resume reads RUN_DIR/config.yaml; use --set to change a key (e.g. rounds)")
        config, out = resume / "config.yaml", resume
        if not config.is_file():
            raise ConfigError(f"--resume {resume}: no config.yaml there; is it a fedloom run directory?")
    overrides = _with_data_dir(set_, data_dir)
    if init_adapter is not None:
        overrides.append(f"adapter.init_from={init_adapter.resolve()}")
    cfg = load_config(config, flags, overrides)
    with _progress() as progress:
        ws = prepare_workspace(cfg, progress)
        summary = run_method(cfg, ws, out, progress, resume=resume is not None)
    best = summary["selection"]["best_round"]
    _print_table(*client_table(summary), title=f"{cfg.method} on {cfg.dataset} — test, round {best} (best on val)")
    console.print(f"run directory: {out}")


@app.command()
def compare(
    methods: Annotated[str, typer.Option(help="comma-separated methods")] = "local,fedavg",
    config: ConfigOpt = None,
    dataset: DatasetOpt = None,
    backbone: BackboneOpt = None,
    rounds: RoundsOpt = None,
    seed: SeedOpt = None,
    out: Annotated[Path, typer.Option(help="parent directory: one run directory per method")] = Path("runs/compare"),
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run several methods on one shared workspace (backbone and frozen features computed once)."""
    from fedloom.experiments.config import load_config
    from fedloom.experiments.report import comparison_report, method_table
    from fedloom.experiments.run import run_method
    from fedloom.experiments.rundir import atomic_write
    from fedloom.experiments.workspace import prepare_workspace

    names = [m.strip() for m in methods.split(",") if m.strip()]
    flags = {"dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    configs = [load_config(config, {**flags, "method": m}, _with_data_dir(set_, data_dir)) for m in names]
    summaries = []
    with _progress() as progress:
        ws = prepare_workspace(configs[0], progress)
        for cfg in configs:
            summaries.append(run_method(cfg, ws, out / cfg.method, progress))
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "report.md", comparison_report(summaries))
    _print_table(*method_table(summaries), title=f"{configs[0].dataset}: test metrics at the best validation round")
    console.print(f"reports: {out / 'report.md'} and one run directory per method under {out}")


@app.command()
def evaluate(
    run_dir: Annotated[Path, typer.Argument(help="a finished in-process run directory")],
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
) -> None:
    """Evaluate a finished run's last checkpoint again with evaluation-time settings changed
    (e.g. --set methods.fedweave.inference=soft), without training again."""
    from fedloom.errors import ConfigError
    from fedloom.experiments.config import load_config
    from fedloom.experiments.evaluate import evaluate_run, evaluation_settings

    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: no config.yaml there; is it a fedloom run directory?")
    with _progress() as progress:
        result = evaluate_run(run_dir, _with_data_dir(set_, data_dir), progress)
    rows = [
        [k, f"{v:.4g}"]
        for k, v in result["metrics"].items()
        if k.startswith("personal/test/") and k.endswith("/macro")
    ]
    settings = evaluation_settings(load_config(run_dir / "config.yaml"))
    label = ", ".join(result["overrides"]) or f"as trained (settings: {', '.join(settings)})"
    _print_table(["metric", "value"], rows, f"{result['method']}, round {result['round']}: {label}")
    console.print(f"written to {run_dir / 'evaluations'}")


@app.command("flower-sim")
def flower_sim(
    config: ConfigOpt = None,
    method: MethodOpt = None,
    dataset: DatasetOpt = None,
    backbone: BackboneOpt = None,
    rounds: RoundsOpt = None,
    seed: SeedOpt = None,
    out: Annotated[Path, typer.Option(help="run directory")] = Path("runs/flower-sim"),
    workers: Annotated[int, typer.Option(min=1, help="ClientApp processes (Ray actors) running at once")] = 1,
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run one method on Flower's simulation engine (one SuperNode per client); same run directory as `run`."""
    import logging

    from flwr.simulation import run_simulation

    from fedloom.apps.clientapp import make_client_app
    from fedloom.apps.serverapp import make_server_app
    from fedloom.experiments.config import load_config
    from fedloom.experiments.report import client_table
    from fedloom.experiments.workspace import prepare_workspace

    flags = {"method": method, "dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    cfg = load_config(config, flags, _with_data_dir(set_, data_dir))
    with _progress() as progress:  # warms the on-disk caches the ClientApps read
        clients = len(prepare_workspace(cfg, progress).learners)
    result: dict = {}
    console.print(f"Flower simulation: {clients} SuperNodes, {workers} ClientApp worker(s)")
    run_simulation(
        server_app=make_server_app(cfg, clients, out, result=result),
        client_app=make_client_app(),
        num_supernodes=clients,
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": workers}},
        verbose_logging=logging.getLogger("fedloom").isEnabledFor(logging.DEBUG),
    )
    if "summary" not in result:
        raise typer.Exit(1)
    summary = result["summary"]
    best = summary["selection"]["best_round"]
    _print_table(*client_table(summary), title=f"{cfg.method} on Flower — test, round {best} (best on val)")
    console.print(f"run directory: {out}")


@app.command("node-worker")
def node_worker(
    socket: Annotated[Path, typer.Option(help="Unix socket to listen on; name it as worker='...' in --node-config")],
) -> None:
    """Keep a SuperNode's backbone and caches loaded: its ClientApps relay their messages here."""
    import signal

    from fedloom.apps.node import answer
    from fedloom.runtime.flower.worker import NodeWorker

    def stop(*_: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)  # leave through NodeWorker.__exit__: the socket file goes too
    logging.getLogger("fedloom").setLevel(logging.INFO)  # one line per answered message
    with NodeWorker(socket, answer) as worker:
        console.print(f"fedloom node worker on {socket} (Ctrl-C or SIGTERM to stop)")
        with suppress(KeyboardInterrupt):
            worker.serve_forever()


@app.command()
def methods() -> None:
    """List the available federated methods."""
    from fedloom.algorithms.registry import METHODS

    for name, method in sorted(METHODS.items()):
        typer.echo(f"{name:12s} {method.summary}")


@app.command("config")
def show_config(config: ConfigOpt = None, set_: SetOpt = None) -> None:
    """Print the fully resolved configuration (defaults, file and overrides)."""
    from fedloom.experiments.config import dump_config, load_config

    typer.echo(dump_config(load_config(config, None, set_)), nl=False)


@data_app.command("list")
def data_list(config: ConfigOpt = None, data_dir: DataDirOpt = None, set_: SetOpt = None) -> None:
    """List every dataset name, its kind, and whether its files are in the data folder."""
    from fedloom.data.files import resolve_data_dir
    from fedloom.data.summary import availability
    from fedloom.experiments.config import load_config

    cfg = load_config(config, None, _with_data_dir(set_, data_dir)).data
    rows = availability(cfg)
    _print_table(
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
    from fedloom.experiments.config import load_config

    cfg = load_config(config, {"dataset": name}, _with_data_dir(set_, data_dir))
    table = load_dataset(cfg.dataset, cfg.data)
    _print_table(["field", "value"], [list(r) for r in describe(table, cfg.data)], title=f"{name}")


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app(standalone_mode=False)
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


if __name__ == "__main__":
    main()
