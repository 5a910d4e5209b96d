"""Commands that make runs: ``fedloom run``, ``compare``, ``prepare`` and ``evaluate`` (`fedloom.runs`)."""

from __future__ import annotations

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
    TrackOpt,
    TrackUriOpt,
    app,
    console,
    interruptible,
    log_to_tracker,
    print_run,
    print_table,
    progress,
    with_data_dir,
)


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
    interruptible()
    from fedloom.errors import ConfigError
    from fedloom.results.tracking import check_tracker
    from fedloom.runs import run as make_run
    from fedloom.runs.config import load_config
    from fedloom.runs.kinds import require_backbone

    check_tracker(track)
    flags = {"method": method, "dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    if resume is not None:
        if config is not None or overwrite:
            raise ConfigError("--resume reads RUN_DIR/config.yaml and keeps its files; use --set to change a key "
                              "(e.g. rounds), or drop --resume to start over")  # fmt: skip
        config, out = resume / "config.yaml", resume
        if not config.is_file():
            raise ConfigError(f"--resume {resume}: no config.yaml there; is it a fedloom run directory?")
    overrides = with_data_dir(set_, data_dir)
    if init_adapter is not None:
        overrides.append(f"adapter.init_from={init_adapter.resolve()}")
    cfg = load_config(config, flags, overrides)
    if init_adapter is not None:
        require_backbone(cfg, "--init-adapter")
    with progress() as shown:
        summary = make_run(cfg, out, shown, overwrite=overwrite, resume=resume is not None)
    print_run(summary, f"on {cfg.dataset}")
    log_to_tracker(track, track_uri, [out])


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
    interruptible()
    from fedloom.paths import atomic_write
    from fedloom.results.compare_report import comparison_report
    from fedloom.results.load import load_run
    from fedloom.results.tracking import check_tracker
    from fedloom.runs import run_many
    from fedloom.runs.config import load_config
    from fedloom.runs.report import method_table

    check_tracker(track)
    names = [m.strip() for m in methods.split(",") if m.strip()]
    flags = {"dataset": dataset, "backbone": backbone, "rounds": rounds, "seed": seed}
    configs = [load_config(config, {**flags, "method": m}, with_data_dir(set_, data_dir)) for m in names]
    outs = [out / cfg.method for cfg in configs]
    with progress() as shown:
        summaries = run_many(configs, outs, shown, overwrite=overwrite)
    atomic_write(out / "report.md", comparison_report([load_run(o) for o in outs]))
    print_table(*method_table(summaries), title=f"{configs[0].dataset}: test metrics at the best validation round")
    console.print(f"reports: {out / 'report.md'} and one run directory per method under {out}")
    log_to_tracker(track, track_uri, outs)


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
    interruptible()
    from fedloom.runs.config import load_config
    from fedloom.runs.kinds import kind_of
    from fedloom.runs.workspace import prepare_workspace

    cfg = load_config(config, {"dataset": dataset, "backbone": backbone}, with_data_dir(set_, data_dir))
    if not kind_of(cfg).backbone:
        console.print(f"{cfg.method} is a structured reference: it reads no model cache, nothing to prepare")
        return
    with progress() as shown:
        ws = prepare_workspace(cfg, shown)
    spent = ", ".join(f"{k} {v:.1f} s" for k, v in ws.setup_seconds.items())
    console.print(f"prepared {cfg.backbone} on {cfg.dataset} ({len(ws.learners)} clients): {spent}")


@app.command()
def evaluate(
    run_dir: Annotated[Path, typer.Argument(help="a finished in-process run directory")],
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
) -> None:
    """Evaluate a finished run's last checkpoint again with evaluation-time settings changed
    (e.g. --set methods.fedweave.inference=soft), without training again."""
    from fedloom.runs.config import load_config
    from fedloom.runs.evaluate import evaluate_run, evaluation_settings

    with progress() as shown:
        result = evaluate_run(run_dir, with_data_dir(set_, data_dir), shown)
    rows = [
        [k, f"{v:.4g}"]
        for k, v in result["metrics"].items()
        if k.startswith("personal/test/") and k.endswith("/macro")
    ]
    settings = evaluation_settings(load_config(run_dir / "config.yaml"))
    label = ", ".join(result["overrides"]) or f"as trained (settings: {', '.join(settings)})"
    print_table(["metric", "value"], rows, f"{result['method']}, round {result['round']}: {label}")
    console.print(f"written to {run_dir / 'evaluations'}")
