"""What `--resume` may change: only `RESUMABLE_KEYS`. Any other change is refused before anything is
written, so a refused resume leaves the run directory exactly as it was."""

from __future__ import annotations

from pathlib import Path

from fedloom.errors import ConfigError
from fedloom.runs.config import (
    RESUMABLE_KEYS,
    RunConfig,
    changed_keys,
    config_digest,
    load_config,
    settings,
)
from fedloom.runtime.checkpoint import CheckpointStore


def resume_changes(run_dir: Path, cfg: RunConfig) -> dict[str, tuple[str, str]]:
    """The keys ``cfg`` changes from ``run_dir/config.yaml`` as dotted key → (was, now), JSON text.

    A change to a key outside `RESUMABLE_KEYS` is a `ConfigError` naming the key and both values, as
    are a config the newest checkpoint was not written with and ``rounds`` below that checkpoint's.
    """
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"--resume {run_dir}: no config.yaml there; is it a fedloom run directory?")
    before = load_config(path)
    changed, then, now = changed_keys(before, cfg), settings(before), settings(cfg)
    refused = [k for k in changed if k not in RESUMABLE_KEYS]
    if refused:
        shown = "; ".join(f"{k} {then.get(k)} -> {now.get(k)}" for k in refused)
        raise ConfigError(
            f"--resume {run_dir} cannot change {shown}: the rounds already done used the old value; "
            f"a resume may change only {', '.join(RESUMABLE_KEYS)} (start a new run with --out for the others)"
        )
    newest = CheckpointStore(run_dir / "checkpoints").newest()
    if newest is not None:
        check_checkpoint(run_dir, cfg, *newest)
    return {k: (then[k], now[k]) for k in changed}


def check_checkpoint(run_dir: Path, cfg: RunConfig, round: int, digest: str) -> None:
    """Refuse to resume ``run_dir`` with ``cfg`` from a checkpoint of ``round`` written under ``digest``."""
    if digest != config_digest(cfg):
        raise ConfigError(f"{run_dir}: config.yaml does not match the run its checkpoint saved (edited by hand?); "
                          "resume with the config it was written with, or start a new run")  # fmt: skip
    if cfg.rounds < round:
        raise ConfigError(f"rounds={cfg.rounds}: {run_dir} is already checkpointed at round {round}")
