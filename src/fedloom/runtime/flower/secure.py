"""SecAgg+ rounds on Flower (flwr 1.42): Flower's `SecAggPlusWorkflow` driven for one round by a
legacy Strategy adapter, so the round loop keeps its own sampling, failures and checkpoints.

The workflow speaks the legacy FitIns / FitRes protocol. Our TRAIN message travels inside the
FitIns config (``MESSAGE``, Flower's protobuf encoding); the client replies with the secure-form
upload as FitRes parameters in sorted key order, the key names (``KEYS``) and its metrics in the
clear, and `secaggplus_mod` masks the parameters. The server sees the weighted mean only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict
from flwr.common import (
    Code,
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Scalar,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.compat.common.recorddict_compat import fitres_to_recorddict
from flwr.server import ServerConfig
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import Strategy
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key
from flwr.serverapp import Grid

from fedloom.algorithms.base import NUM_EXAMPLES, Record
from fedloom.runtime.config import SecureAggregationConfig
from fedloom.runtime.flower.relay import encode
from fedloom.runtime.rounds import ClientResult, SecureRound

FITINS = "fitins.config"  # the legacy FitIns config record a SecAgg+ collect-stage message carries
MESSAGE, KEYS, SECONDS = "fedloom.message", "fedloom.keys", "fedloom.seconds"


def secure_fitres(upload: Record, metrics: Mapping[str, float], seconds: float) -> RecordDict:
    """A client's secure-form upload as the legacy FitRes `secaggplus_mod` masks."""
    keys = sorted(upload.tensors)
    arrays = [upload.tensors[k].detach().float().numpy() for k in keys]
    scalars: dict[str, Scalar] = {**metrics, KEYS: json.dumps(keys), SECONDS: seconds}
    res = FitRes(Status(Code.OK, ""), ndarrays_to_parameters(arrays), int(upload.scalars[NUM_EXAMPLES]), scalars)
    return fitres_to_recorddict(res, keep_input=True)


@dataclass
class _OneRound(Strategy):
    """The legacy Strategy the workflow calls: our clients and messages in, the revealed mean out."""

    grid: Grid
    instructions: dict[int, RecordDict]  # node id → our TRAIN message content
    results: list[tuple[ClientProxy, FitRes]] = field(default_factory=list)

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        empty = Parameters(tensors=[], tensor_type="")
        return [(GridClientProxy(node, self.grid, 0), FitIns(empty, {MESSAGE: encode(content)}))
                for node, content in self.instructions.items()]  # fmt: skip

    def aggregate_fit(
        self, server_round: int, results: list[tuple[ClientProxy, FitRes]], failures: list
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        self.results = list(results)
        return None, {}

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        return None

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        return []

    def aggregate_evaluate(
        self, server_round: int, results: list[tuple[ClientProxy, EvaluateRes]], failures: list
    ) -> tuple[float | None, dict[str, Scalar]]:
        return None, {}

    def evaluate(self, server_round: int, parameters: Parameters) -> None:
        return None


def secure_round(
    grid: Grid,
    contents: Mapping[str, RecordDict],
    nodes: Mapping[str, int],
    cfg: SecureAggregationConfig,
    max_weight: float,
    rnd: int,
    timeout: float,
) -> SecureRound:
    """One SecAgg+ round over the clients in ``contents`` (client id → TRAIN content)."""
    strategy = _OneRound(grid, {nodes[c]: content for c, content in contents.items()})
    context = LegacyContext(Context(0, 0, {}, RecordDict(), {}), ServerConfig(num_rounds=1), strategy)
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({Key.CURRENT_ROUND: rnd})
    context.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()
    workflow = SecAggPlusWorkflow(
        cfg.num_shares,
        cfg.reconstruction_threshold,
        max_weight=max_weight,
        clipping_range=cfg.clipping_range,
        quantization_range=cfg.quantization_range,
        timeout=timeout,
    )
    workflow(grid, context)
    by_node = {node: cid for cid, node in nodes.items()}
    clients = {c: ClientResult(failure="dropped out of secure aggregation") for c in contents}
    mean, total = None, 0
    for proxy, res in strategy.results:
        metrics = dict(res.metrics)
        keys, seconds = json.loads(str(metrics.pop(KEYS))), float(metrics.pop(SECONDS))
        values = {k: float(v) for k, v in metrics.items()}
        clients[by_node[proxy.node_id]] = ClientResult(None, values, None, seconds)
        total += res.num_examples
        if mean is None:  # every result carries the same revealed mean
            arrays = parameters_to_ndarrays(res.parameters)
            mean = {k: torch.from_numpy(np.asarray(a, dtype=np.float32)) for k, a in zip(keys, arrays, strict=True)}
    return SecureRound(clients, None if mean is None else Record(mean, {NUM_EXAMPLES: total}))
