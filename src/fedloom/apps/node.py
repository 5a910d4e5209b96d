"""Where a node's runs come from: the run's configuration, with the node's own data folder, built
into a workspace once per process and kept for the next messages (and the next runs of a worker)."""

from __future__ import annotations

import yaml

from fedloom.experiments.config import RunConfig, config_digest
from fedloom.experiments.methods import build_method
from fedloom.experiments.workspace import prepare_workspace
from fedloom.runtime.flower.node import Federation, Node, NodeConfig

KEEP = 2  # runs a process keeps built (backbone + partitions), newest first
_BUILT: dict[str, Federation] = {}


def federation(config: str, node: NodeConfig) -> Federation:
    """The run described by ``config`` (YAML) on this node, built on first use."""
    raw = yaml.safe_load(config)
    if "data-dir" in node:
        raw.setdefault("data", {})["data_dir"] = str(node["data-dir"])
    cfg = RunConfig.model_validate(raw)
    key = config_digest(cfg)
    if key not in _BUILT:
        while len(_BUILT) >= KEEP:  # a long-lived node worker serves run after run
            _BUILT.pop(next(iter(_BUILT)))
        ws = prepare_workspace(cfg)
        algorithm = build_method(cfg, ws.lm, server=False)
        _BUILT[key] = Federation(
            algorithm, ws.learners, ws.shared_init, cfg.seed, cfg.federation.wire, ws.table.synthetic
        )
    return _BUILT[key]


answer = Node(federation).answer
