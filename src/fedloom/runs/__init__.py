"""Making runs: the one way from a config to a run folder.

    from fedloom.runs import run
    from fedloom.runs.config import load_config
    summary = run(load_config("configs/default.yaml", {"method": "rpa"}), Path("runs/rpa"))

`run` claims the folder (refused while another run holds it), builds what the config's kind of run needs
(`fedloom.runs.kinds`) and trains, writing the run directory (`fedloom.runs.rundir`); it returns the
summary (summary.json). Everything is imported when called, so ``import fedloom.runs`` stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedloom.progress import Progress
    from fedloom.runs.config import RunConfig
    from fedloom.runs.workspace import Workspace


def run(
    cfg: RunConfig,
    out: Path,
    progress: Progress | None = None,
    *,
    overwrite: bool = False,
    resume: bool = False,
    workspace: Workspace | None = None,
) -> dict[str, Any]:
    """Run ``cfg`` into the run directory ``out`` and return its summary. ``overwrite``: replace a
    finished run there (only what fedloom wrote is deleted); ``resume``: continue the run in ``out`` from
    its newest checkpoint (only `RESUMABLE_KEYS` may differ from its config.yaml); ``workspace``: an
    already built workspace of the same data and backbone (several methods on one feature cache)."""
    from fedloom.runs.kinds import kind_of, require_rounds
    from fedloom.runs.resume import resume_changes
    from fedloom.runs.rundir import claim_run_dir, ensure_writable, hold_run_dir

    kind = kind_of(cfg)
    if resume:  # every check before the first write
        require_rounds(cfg, "--resume")
        resume_changes(out, cfg)
        ensure_writable(out)
    with hold_run_dir(out) if resume else claim_run_dir(out, overwrite):
        if workspace is None and kind.workspace is not None:
            workspace = kind.workspace(cfg, progress)
        return kind.train(cfg, workspace, out, progress, resume)


def run_many(
    configs: Sequence[RunConfig], outs: Sequence[Path], progress: Progress | None = None, *, overwrite: bool = False
) -> list[dict[str, Any]]:
    """Run each config into its folder, every folder claimed before the first starts; the runs on the LLM
    share one workspace (backbone and frozen features computed once: the configs differ in the method)."""
    from fedloom.runs.kinds import kind_of
    from fedloom.runs.rundir import claim_run_dir

    kinds = [kind_of(cfg) for cfg in configs]
    with ExitStack() as held:
        for out in outs:
            held.enter_context(claim_run_dir(out, overwrite))
        first = next((i for i, kind in enumerate(kinds) if kind.name == "llm"), None)
        shared = None if first is None else kinds[first].workspace(configs[first], progress)  # type: ignore[misc]
        return [run(cfg, out, progress, workspace=shared if kind.name == "llm" else None)
                for cfg, out, kind in zip(configs, outs, kinds, strict=True)]  # fmt: skip
