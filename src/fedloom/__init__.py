"""fedloom: federated adaptation of frozen LLMs across data owners who cannot pool their data.

The Python API is two calls, both importing what they need when called::

    import fedloom
    summary = fedloom.run(fedloom.config(method="rpa", rounds=3), "runs/rpa")   # a run folder, its summary
    runs = fedloom.load("runs/rpa")            # finished runs as frames: .summary, .rounds, .daily
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedloom.results.load import Runs
    from fedloom.runs.config import RunConfig

__version__ = "0.1.0"


def config(path: Path | str | None = None, *overrides: str, **keys: Any) -> RunConfig:
    """A validated run config: the YAML at ``path`` (or the defaults), then ``key=value`` ``overrides``
    (dotted keys, as ``--set``), then ``keys`` (top-level keys: ``method``, ``dataset``, ``rounds``...)."""
    from fedloom.runs.config import load_config

    return load_config(path, keys, list(overrides))


def run(cfg: RunConfig, out: Path | str, *, overwrite: bool = False, resume: bool = False) -> dict[str, Any]:
    """Make the run ``cfg`` in the folder ``out`` and return its summary (`fedloom.runs.run`)."""
    from fedloom.runs import run as make_run

    return make_run(cfg, Path(out), overwrite=overwrite, resume=resume)


def load(*paths: Path | str, final: bool = False) -> Runs:
    """Finished runs under ``paths`` as pandas frames (`fedloom.results.load.load`)."""
    from fedloom.results.load import load as load_runs

    return load_runs(*paths, final=final)
