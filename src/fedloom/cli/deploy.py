"""Commands that run fedloom on Flower: ``flower-sim`` (the simulation engine), and for a deployment the
owner's ``supernode`` and ``node-worker``, the coordinator's ``fleet-gateway``, and ``app-hash`` /
``superexec`` for app approval (`fedloom.apps`, `fedloom.runtime.flower`)."""

from __future__ import annotations

import logging
from contextlib import suppress
from pathlib import Path
from typing import Annotated

import typer

from fedloom.cli.app import (
    BackboneOpt,
    ConfigOpt,
    DataDirOpt,
    DatasetOpt,
    MethodOpt,
    OverwriteOpt,
    RoundsOpt,
    SeedOpt,
    SetOpt,
    app,
    console,
    interruptible,
    print_run,
    progress,
    with_data_dir,
)


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
    from fedloom.apps.simulation import simulate
    from fedloom.runs.config import load_config

    flags = {"method": method, "dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    cfg = load_config(config, flags, with_data_dir(set_, data_dir))

    def started(clients: int) -> None:
        console.print(f"Flower simulation: {clients} SuperNodes, {workers} ClientApp worker(s)")

    with progress() as shown:
        summary = simulate(cfg, out, workers, shown, overwrite, on_start=started)
    print_run(summary, "on Flower")


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
    interruptible()  # SIGTERM too stops both processes
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
