"""``fedloom`` command line: run one method, compare several, evaluate a finished run again, inspect
config and methods."""

from __future__ import annotations

import logging
import sys
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichBar
from rich.table import Table

from fedloom.errors import FedloomError

if TYPE_CHECKING:
    from fedloom.experiments.suite import SuiteState
    from fedloom.experiments.suite_spec import Job

# a crash prints its traceback without local variables: they hold data rows and the full config
app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_show_locals=False)
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

data_app = typer.Typer(
    no_args_is_help=True,
    help="Datasets: what is available where, and what one holds.",
    pretty_exceptions_show_locals=False,
)
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


def _print_table(header: list[str], rows: list[list[str]], title: str) -> None:
    table = Table(title=title)
    for h in header:
        table.add_column(h)
    for r in rows:
        table.add_row(*(c.replace("**", "") for c in r))
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def _interruptible() -> None:
    """SIGINT and SIGTERM stop the command as Ctrl-C does (KeyboardInterrupt → exit 130, runs keep their
    last checkpoint), also when it was started in the background, where the shell ignores SIGINT."""
    import signal

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, stop)


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
    overwrite: OverwriteOpt = False,
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
    track: TrackOpt = None,
    track_uri: TrackUriOpt = None,
) -> None:
    """Run one federated experiment and write its run directory."""
    _interruptible()
    from fedloom.errors import ConfigError
    from fedloom.experiments.config import load_config
    from fedloom.experiments.reference_run import run_reference
    from fedloom.experiments.report import client_table
    from fedloom.experiments.resume import resume_changes
    from fedloom.experiments.run import run_method
    from fedloom.experiments.rundir import claim_run_dir, ensure_writable, hold_run_dir
    from fedloom.experiments.tracking import check_tracker
    from fedloom.experiments.workspace import prepare_workspace

    check_tracker(track)
    flags = {"method": method, "dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    if resume is not None:
        if config is not None or overwrite:
            raise ConfigError("--resume reads RUN_DIR/config.yaml and keeps its files; use --set to change a key "
                              "(e.g. rounds), or drop --resume to start over")  # fmt: skip
        config, out = resume / "config.yaml", resume
        if not config.is_file():
            raise ConfigError(f"--resume {resume}: no config.yaml there; is it a fedloom run directory?")
    overrides = _with_data_dir(set_, data_dir)
    if init_adapter is not None:
        overrides.append(f"adapter.init_from={init_adapter.resolve()}")
    cfg = load_config(config, flags, overrides)
    if resume is not None:
        cfg.require_rounds("--resume")
    if init_adapter is not None:
        cfg.require_federated("--init-adapter")
    if resume is not None:  # every check before the first write
        resume_changes(resume, cfg)
        ensure_writable(resume)
    with hold_run_dir(out) if resume is not None else claim_run_dir(out, overwrite), _progress() as progress:
        if cfg.is_reference:
            summary = run_reference(cfg, out, progress, resume=resume is not None)
        else:
            ws = prepare_workspace(cfg, progress)
            summary = run_method(cfg, ws, out, progress, resume=resume is not None)
    best = summary["selection"]["best_round"]
    _print_table(*client_table(summary), title=f"{cfg.method} on {cfg.dataset} — test, round {best} (best on val)")
    if "cross_section" in summary:
        pooled = ", ".join(f"{k} {v:+.4f}" for k, v in summary["cross_section"].items())
        console.print(f"test, one cross-section of every client's stocks per day: {pooled}")
    console.print(f"run directory: {out}")
    _track(track, track_uri, [out])


@app.command()
def prepare(
    config: ConfigOpt = None,
    dataset: DatasetOpt = None,
    backbone: BackboneOpt = None,
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
) -> None:
    """Build a config's caches now — the converted model, token ids, frozen features — so the runs that
    read them start at once (`fedloom suite` prepares each workspace on every core before its workers)."""
    _interruptible()
    from fedloom.experiments.config import load_config
    from fedloom.experiments.workspace import prepare_workspace

    cfg = load_config(config, {"dataset": dataset, "backbone": backbone}, _with_data_dir(set_, data_dir))
    if cfg.is_reference:
        console.print(f"{cfg.method} is a structured reference: it reads no model cache, nothing to prepare")
        return
    with _progress() as progress:
        ws = prepare_workspace(cfg, progress)
    spent = ", ".join(f"{k} {v:.1f} s" for k, v in ws.setup_seconds.items())
    console.print(f"prepared {cfg.backbone} on {cfg.dataset} ({len(ws.learners)} clients): {spent}")


def _track(tracker: str | None, uri: str | None, run_dirs: list[Path]) -> None:
    """Log finished run directories to the tracker named by ``--track`` (none: nothing)."""
    if tracker is None:
        return
    from fedloom.experiments.tracking import log_run

    for run_dir in run_dirs:
        console.print(f"{tracker}: {run_dir} logged as run {log_run(run_dir, uri)}")


@app.command()
def compare(
    methods: Annotated[str, typer.Option(help="comma-separated methods")] = "local,fedavg",
    config: ConfigOpt = None,
    dataset: DatasetOpt = None,
    backbone: BackboneOpt = None,
    rounds: RoundsOpt = None,
    seed: SeedOpt = None,
    out: Annotated[Path, typer.Option(help="parent directory: one run directory per method")] = Path("runs/compare"),
    overwrite: OverwriteOpt = False,
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
    track: TrackOpt = None,
    track_uri: TrackUriOpt = None,
) -> None:
    """Run several methods on one shared workspace (backbone and frozen features computed once)."""
    _interruptible()
    from fedloom.experiments.config import load_config
    from fedloom.experiments.reference_run import run_reference
    from fedloom.experiments.report import comparison_report, method_table
    from fedloom.experiments.run import run_method
    from fedloom.experiments.rundir import atomic_write, claim_run_dir
    from fedloom.experiments.tracking import check_tracker
    from fedloom.experiments.workspace import prepare_workspace

    check_tracker(track)
    names = [m.strip() for m in methods.split(",") if m.strip()]
    flags = {"dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    configs = [load_config(config, {**flags, "method": m}, _with_data_dir(set_, data_dir)) for m in names]
    summaries = []
    with ExitStack() as held, _progress() as progress:
        for cfg in configs:
            held.enter_context(claim_run_dir(out / cfg.method, overwrite))
        federated = [cfg for cfg in configs if not cfg.is_reference]
        ws = prepare_workspace(federated[0], progress) if federated else None
        for cfg in configs:
            if cfg.is_reference:
                summaries.append(run_reference(cfg, out / cfg.method, progress))
            else:
                assert ws is not None
                summaries.append(run_method(cfg, ws, out / cfg.method, progress))
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "report.md", comparison_report(summaries))
    _print_table(*method_table(summaries), title=f"{configs[0].dataset}: test metrics at the best validation round")
    console.print(f"reports: {out / 'report.md'} and one run directory per method under {out}")
    _track(track, track_uri, [out / cfg.method for cfg in configs])


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
    from fedloom.experiments.rundir import hold_run_dir

    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: no config.yaml there; is it a fedloom run directory?")
    with hold_run_dir(run_dir), _progress() as progress:
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
    overwrite: OverwriteOpt = False,
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
    from fedloom.experiments.rundir import claim_run_dir
    from fedloom.experiments.workspace import prepare_workspace

    flags = {"method": method, "dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    cfg = load_config(config, flags, _with_data_dir(set_, data_dir))
    cfg.require_federated("the Flower simulation")
    with claim_run_dir(out, overwrite):  # the ServerApp runs in this process and holds it again
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


@app.command()
def table(
    paths: Annotated[list[Path], typer.Argument(help="run directories, or folders holding them (a suite's)")],
    reference: Annotated[str | None, typer.Option(help="row the bootstrap compares every other row with")] = None,
    daily: Annotated[str | None, typer.Option(help="daily.csv column compared (default: the primary metric)")] = None,
    final: Annotated[bool, typer.Option(help="bootstrap the final-round models' series (daily_final.csv)")] = False,
    column: Annotated[list[str] | None, typer.Option(help="extra column LABEL=dotted.path (repeatable)")] = None,
    evaluations: Annotated[bool, typer.Option(help="re-evaluations (RUN/evaluations/) as rows")] = False,
    csv: Annotated[Path | None, typer.Option(help="also write the numbers as CSV")] = None,
    latex: Annotated[Path | None, typer.Option(help="also write a booktabs LaTeX table")] = None,
) -> None:
    """Mean ± std over seeds per row (method / switch set), best cells, bootstrap against a reference row."""
    from fedloom.experiments.table import build_tables, default_columns, find_runs, parse_column
    from fedloom.experiments.table_render import to_csv, to_latex, to_markdown

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
    reference: Annotated[str | None, typer.Option(help="row the table's bootstrap compares with")] = None,
) -> None:
    """One static HTML page (report.html + PNG figures) of a run or of a folder of runs."""
    from fedloom.experiments.report_page import write_report

    console.print(f"written: {write_report(path, out, reference)}")


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
    from fedloom.experiments.suite import SuiteRunner, estimate, job_status, measured_seconds
    from fedloom.experiments.suite_spec import load_suite, select_jobs
    from fedloom.experiments.tracking import check_tracker

    check_tracker(track)
    spec = select_jobs(load_suite(file, _with_data_dir(set_, data_dir)), only or [])
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
        _print_table(
            ["job", "row", "state", "est. s"], rows, f"suite {spec.config.name}: {len(rows)} jobs in {suite_dir}"
        )
        if times:
            console.print(f"estimated: {total / workers / 60:.1f} min of work left with {workers} worker(s)")
        return

    _interruptible()
    with _suite_display(spec.config.name, len(spec.jobs)) as (on_event, on_tick):
        tracking = [*(["--track", track] if track else []), *(["--track-uri", track_uri] if track_uri else [])]
        state = SuiteRunner(spec, suite_dir, workers, on_event, on_tick, job_args=tracking).run()
    summary = f"{state.done} of {state.total} jobs finished, {len(state.failed)} failed"
    console.print(f"suite {spec.config.name}: {summary} (errors: {suite_dir / 'suite.jsonl'}); "
                  f"table: fedloom table {suite_dir}", soft_wrap=True)  # fmt: skip
    if state.failed:
        raise typer.Exit(1)


@contextmanager
def _suite_display(name: str, total: int):
    """One live line for the suite (done / running / failed, ETA) and a printed line per job event,
    which is all that shows when the output is not a terminal."""
    import time

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


@app.command("fleet-gateway")
def fleet_gateway(
    listen: Annotated[str, typer.Option(help="HOST:PORT the SuperNodes connect to, e.g. 0.0.0.0:9092")],
    superlink: Annotated[
        str, typer.Option(help="the SuperLink on loopback: http://127.0.0.1:8000 (https:// with --superlink-ca)")
    ] = "http://127.0.0.1:8000",
    ssl_certfile: Annotated[
        Path | None, typer.Option(help="certificate the nodes verify (with --ssl-keyfile)")
    ] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="its private key")] = None,
    superlink_ca: Annotated[Path | None, typer.Option(help="CA of a TLS SuperLink behind the gateway")] = None,
    max_body_mb: Annotated[float, typer.Option(min=1, help="largest request body forwarded (413 above)")] = 64,
    max_concurrent: Annotated[int, typer.Option(min=1, help="requests in flight at once (503 beyond)")] = 64,
) -> None:
    """Publish only the Fleet API: SuperNodes reach the SuperLink, its Control API stays on loopback."""
    from fedloom.runtime.flower.gateway import GatewayConfig, serve_gateway

    config = GatewayConfig(listen, superlink, ssl_certfile, ssl_keyfile, superlink_ca,
                           max_body=int(max_body_mb * 2**20), max_concurrent=max_concurrent)  # fmt: skip
    scheme = "https" if ssl_certfile else "http"
    console.print(f"fedloom fleet gateway on {scheme}://{listen} → {superlink} (Fleet API only; Ctrl-C to stop)")
    with suppress(KeyboardInterrupt):
        serve_gateway(config)


@app.command("app-hash")
def app_hash(app_dir: Annotated[Path, typer.Argument(help="Flower app folder")] = Path("deploy/flower")) -> None:
    """Print the sha256 of the app bundle `flwr run APP_DIR` submits: what `superexec --approved-app` pins."""
    from fedloom.runtime.flower.approval import app_hash as digest

    print(digest(app_dir))


@app.command("superexec")
def superexec(
    runtime_api_address: Annotated[str, typer.Option(help="the SuperNode's (or SuperLink's) Runtime API, HOST:PORT")],
    approved_app: Annotated[
        list[str], typer.Option(help="an approved app's sha256 (fedloom app-hash), or a file of them; repeatable")
    ],
    insecure: Annotated[bool, typer.Option(help="the Runtime API has no TLS")] = False,
    root_certificates: Annotated[Path | None, typer.Option(help="CA of the Runtime API's certificate")] = None,
) -> None:
    """Flower's SuperExec that launches only approved apps (run the node with --isolation process)."""
    from fedloom.runtime.flower.approval import parse_approved, run_approved_superexec

    approved = parse_approved(approved_app)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s fedloom: %(message)s"))
    logging.getLogger("fedloom").addHandler(handler)
    logging.getLogger("fedloom").setLevel(logging.INFO)
    console.print(f"fedloom superexec on {runtime_api_address}: {len(approved)} approved app(s)")
    with suppress(KeyboardInterrupt):
        run_approved_superexec(runtime_api_address, approved, insecure, root_certificates)


@app.command("supernode", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def supernode(
    ctx: typer.Context,
    approved_app: Annotated[
        list[str] | None, typer.Option(help="an approved app's sha256 (fedloom app-hash), or a file of them")
    ] = None,
    any_app: Annotated[bool, typer.Option(help="run any app a coordinator submits (a trial on one machine)")] = False,
) -> None:
    """A data owner's SuperNode that runs only approved apps: the other arguments go to flower-supernode,
    which runs with --isolation process beside `fedloom superexec --approved-app` (one command, one stop)."""
    _interruptible()  # SIGTERM too stops both processes
    from fedloom.errors import ConfigError
    from fedloom.runtime.flower.approval import parse_approved, supernode_commands, supervise

    if approved_app:
        commands = supernode_commands(ctx.args, parse_approved(approved_app))
        console.print(f"fedloom supernode: runs only the approved app(s) {', '.join(approved_app)}")
    elif any_app:
        console.print(
            "[bold red]WARNING: this SuperNode runs ANY app a coordinator submits, next to your "
            "data. Start it with --approved-app HASH (fedloom app-hash deploy/flower).[/bold red]"
        )
        commands = supernode_commands(ctx.args, None)
    else:
        raise ConfigError("fedloom supernode needs --approved-app HASH (`fedloom app-hash deploy/flower` prints "
                          "it); --any-app runs whatever a coordinator submits")  # fmt: skip
    raise typer.Exit(supervise(commands))


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


if __name__ == "__main__":
    main()
