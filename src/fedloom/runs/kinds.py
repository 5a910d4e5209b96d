"""Run kinds: what a config makes. The one place that asks whether ``method`` is a federated method on
the LLM or a structured reference, and how that reference is trained.

* ``llm``: ``method`` is a federated method (`fedloom methods`) and the algorithm; trained round by round
  on the frozen LLM; workspace: backbone, frozen features, one learner per client.
* ``federated-reference``: ``method`` names a reference's network (``references.mode: federated``), the
  algorithm is ``references.algorithm``; trained round by round; workspace: the network, one learner per
  client.
* ``reference``: ``method`` is a reference model fitted in one pass (``references.mode``: pooled / local, or
  federated for a reference solved from the clients' sums: the ridge probe); no algorithm, no workspace.

Each kind supplies its workspace and its trainer; the run directory's tail (summary.json, the daily and
portfolio outputs, report.md) is written by the trainers through `fedloom.runs.outputs`. Callables import
their modules when called, so validating a config or listing kinds never loads torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedloom.errors import ConfigError
from fedloom.references.registry import REFERENCES
from fedloom.runs.config import RunConfig

if TYPE_CHECKING:
    from fedloom.progress import Progress
    from fedloom.runs.workspace import Workspace

Summary = dict[str, Any]


@dataclass(frozen=True)
class RunKind:
    """How one kind of run is made (see the module's table)."""

    name: str
    rounds: bool  # round by round: checkpointed, resumable, re-evaluable
    backbone: bool  # computes with the frozen LLM: its caches can be prepared, it runs on Flower
    algorithm: Callable[[RunConfig], str] | None  # the federated algorithm (a `fedloom methods` name)
    workspace: Callable[[RunConfig, Progress | None], Workspace] | None
    train: Callable[[RunConfig, Workspace | None, Path, Progress | None, bool], Summary]

    def summary_fields(self, cfg: RunConfig) -> dict[str, Any]:
        """What summary.json says of the model behind the run: the backbone, or the reference and how it
        was trained (a one-pass fit adds its fits' details)."""
        if self.name == "llm":
            return {"backbone": cfg.backbone}
        if self.name == "federated-reference":
            return {"backbone": None, "reference": {"mode": "federated", "algorithm": cfg.references.algorithm}}
        return {"backbone": None, "reference": {"mode": cfg.references.mode}}


def _llm_workspace(cfg: RunConfig, progress: Progress | None) -> Workspace:
    from fedloom.runs.workspace import prepare_workspace

    return prepare_workspace(cfg, progress)


def _network_workspace(cfg: RunConfig, progress: Progress | None) -> Workspace:
    from fedloom.runs.reference import federated_workspace

    return federated_workspace(cfg)


def _rounds(cfg: RunConfig, ws: Workspace | None, out: Path, progress: Progress | None, resume: bool) -> Summary:
    from fedloom.runs.llm import run_method

    assert ws is not None
    return run_method(cfg, ws, out, progress, resume)


def _fit(cfg: RunConfig, ws: Workspace | None, out: Path, progress: Progress | None, resume: bool) -> Summary:
    from fedloom.runs.reference import run_reference

    return run_reference(cfg, out, progress)


KINDS = {
    "llm": RunKind("llm", True, True, lambda c: c.method, _llm_workspace, _rounds),
    "federated-reference": RunKind(
        "federated-reference", True, False, lambda c: c.references.algorithm, _network_workspace, _rounds
    ),
    "reference": RunKind("reference", False, False, None, None, _fit),
}


def kind_of(cfg: RunConfig) -> RunKind:
    """The kind of run ``cfg`` makes."""
    if cfg.method not in REFERENCES:
        return KINDS["llm"]
    rounds = cfg.references.mode == "federated" and not REFERENCES[cfg.method].one_pass_federated
    return KINDS["federated-reference" if rounds else "reference"]


def require_backbone(cfg: RunConfig, where: str) -> None:
    """Refuse a structured reference where only a federated method on the LLM runs (Flower, an adapter)."""
    if not kind_of(cfg).backbone:
        raise ConfigError(f"{cfg.method} is a structured reference: it trains on numeric features without "
                          f"the LLM, so {where} does not apply; run it with `fedloom run` (references.mode="
                          "federated runs there, in process)")  # fmt: skip


def require_rounds(cfg: RunConfig, where: str) -> None:
    """Refuse a run without rounds where a round-by-round run is needed (resume, re-evaluation): a
    reference fitted in one pass; a federated reference has rounds."""
    if not kind_of(cfg).rounds:
        raise ConfigError(
            f"{cfg.method} is a structured reference fitted in one pass, so {where} does not apply; "
            "run it again (`--overwrite`) or train it with references.mode=federated"
        )
