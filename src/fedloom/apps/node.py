"""Where a node's runs come from: the run's configuration, confined to the node's own data folder, built
into a workspace once per process and kept for the next messages (and the next runs of a worker)."""

from __future__ import annotations

from pydantic import ValidationError

from fedloom.apps.confine import confine, node_data_dir
from fedloom.errors import ConfigError, NodeRefusedError
from fedloom.runs.config import RunConfig, config_digest, read_yaml
from fedloom.runs.methods import build_method
from fedloom.runs.workspace import prepare_workspace
from fedloom.runtime.flower.node import Federation, Node, NodeConfig

KEEP = 2  # runs a process keeps built (backbone + partitions), newest first
_BUILT: dict[str, Federation] = {}


def federation(config: str, node: NodeConfig) -> Federation:
    """The run described by ``config`` (YAML, the coordinator's) on this node, built on first use; its
    data paths confined to the node's own data folder (`fedloom.apps.confine`)."""
    try:
        raw = confine(read_yaml(None, config), node_data_dir(node))
    except ConfigError as exc:  # malformed, an alias bomb: the coordinator's own text, safe to name
        raise NodeRefusedError(f"the run configuration: {exc}") from None
    try:
        cfg = RunConfig.model_validate(raw)
    except ValidationError as exc:  # the keys only: a message may quote what the node found on its disk
        keys = sorted({".".join(map(str, e["loc"])) or "(top level)" for e in exc.errors()})
        raise NodeRefusedError(f"the run configuration is invalid on this node at {', '.join(keys)}") from None
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
