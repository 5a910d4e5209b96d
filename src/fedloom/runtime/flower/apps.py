"""A Flower ServerApp / ClientApp pair around the same algorithm objects as the in-process runtime.

The ServerApp owns sampling, downloads, validation and aggregation; each ClientApp owns one data
owner's rows (``partition-id`` in its node config → the client with that index in sorted order),
builds its workspace once per process and keeps its private state in ``context.state``. Local work
goes through `client_round`, seeded from (seed, round, client) alone, so for a fixed configuration
both runtimes compute the same adapters.
"""

from __future__ import annotations

import time
from typing import Any

from flwr.app import ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedloom.algorithms.registry import build_algorithm
from fedloom.errors import ConfigError, UploadError
from fedloom.experiments.config import RunConfig
from fedloom.runtime.communication import wire_dtype
from fedloom.runtime.flower.records import from_recorddict, load_state, store_state, to_recorddict
from fedloom.runtime.sampling import select_clients
from fedloom.runtime.seeding import generator
from fedloom.runtime.simulation import client_round
from fedloom.runtime.validation import validate_upload

ROUND, CLIENT_ID = "round", "client_id"
_WORKSPACES: dict[str, Any] = {}


def workspace(cfg: RunConfig) -> Any:
    """This process's workspace for ``cfg`` (backbone, features, learners), built on first use."""
    from fedloom.experiments.runner import config_digest, prepare_workspace

    key = config_digest(cfg)
    if key not in _WORKSPACES:
        _WORKSPACES[key] = prepare_workspace(cfg)
    return _WORKSPACES[key]


def make_client_app(cfg: RunConfig) -> ClientApp:
    app = ClientApp()
    algorithm = build_algorithm(cfg.method, cfg.build_context(workspace(cfg).lm.layout.slot()))
    wire = wire_dtype(cfg.federation.wire_dtype)

    def client_id(context: Context) -> str:
        ids = sorted(workspace(cfg).learners)
        pid = int(context.node_config.get("partition-id", -1))
        if not 0 <= pid < len(ids):
            raise ConfigError(f"node partition-id {pid} does not name one of the {len(ids)} clients")
        return ids[pid]

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        return Message(RecordDict({"client": ConfigRecord({CLIENT_ID: client_id(context)})}), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        ws, cid = workspace(cfg), client_id(context)
        learner = ws.learners[cid]
        state = load_state(context.state)
        if state is None:
            state = algorithm.init_client(ws.shared_init, learner, generator(cfg.seed, "init", cid))
        rnd = int(msg.content.config_records["config"][ROUND])
        update = client_round(algorithm, learner, from_recorddict(msg.content), state, cfg.seed, rnd)
        store_state(context.state, update.state)  # private: float32, never on the wire
        reply = to_recorddict(update.upload, wire)
        reply["metrics"] = MetricRecord({k: float(v) for k, v in update.metrics.items()})
        return Message(reply, reply_to=msg)

    return app


def make_server_app(
    cfg: RunConfig, num_nodes: int, result: dict[str, Any] | None = None, timeout: float = 3600.0
) -> ServerApp:
    """The ServerApp, which starts once ``num_nodes`` SuperNodes are connected (or fails after
    ``timeout`` seconds); with ``result``, the final server state and per-round log are left in it."""
    app = ServerApp()
    algorithm = build_algorithm(cfg.method, cfg.build_context(workspace(cfg).lm.layout.slot()))
    wire = wire_dtype(cfg.federation.wire_dtype)

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        nodes = _client_nodes(grid, num_nodes, timeout)
        clients = sorted(nodes)
        server = algorithm.init_server(workspace(cfg).shared_init, clients)
        log = []
        for rnd in range(1, cfg.rounds + 1):
            fed = cfg.federation
            selected = select_clients(clients, fed.fraction, fed.clients_per_round, rnd, cfg.seed)
            downloads = algorithm.configure(server, selected, rnd)
            messages = []
            for cid in selected:
                content = to_recorddict(downloads[cid], wire)
                content["config"] = ConfigRecord({ROUND: rnd})
                messages.append(grid.create_message(content, MessageType.TRAIN, nodes[cid], str(rnd)))
            uploads, problems = {}, {}
            by_node = {nodes[c]: c for c in selected}
            for reply in grid.send_and_receive(messages, timeout=timeout):
                cid = by_node[reply.metadata.src_node_id]
                if reply.has_error():
                    problems[cid] = f"error: {reply.error.reason}"
                    continue
                upload = from_recorddict(reply.content)
                try:
                    validate_upload(upload, algorithm.upload_spec(downloads[cid], cid), downloads[cid],
                                    cfg.federation.max_update_norm)  # fmt: skip
                except UploadError as exc:
                    problems[cid] = f"rejected: {exc}"
                    continue
                uploads[cid] = upload
            if len(uploads) >= cfg.federation.min_clients:
                server = algorithm.aggregate(server, uploads, rnd)
            log.append({"round": rnd, "selected": selected, "accepted": sorted(uploads), "problems": problems})
        if result is not None:
            result.update(server=server, log=log)

    return app


def _client_nodes(grid: Grid, num_nodes: int, timeout: float) -> dict[str, int]:
    """Client id → node id, asked of every node once ``num_nodes`` are connected."""
    deadline = time.monotonic() + timeout
    while len(node_ids := sorted(grid.get_node_ids())) < num_nodes:
        if time.monotonic() > deadline:
            raise ConfigError(f"only {len(node_ids)} of {num_nodes} SuperNodes connected within {timeout:.0f} s")
        time.sleep(0.2)
    messages = [grid.create_message(RecordDict(), MessageType.QUERY, node, "clients") for node in node_ids]
    out = {}
    for reply in grid.send_and_receive(messages, timeout=timeout):
        if reply.has_error():
            raise ConfigError(f"node {reply.metadata.src_node_id} failed to name its client: {reply.error.reason}")
        out[str(reply.content.config_records["client"][CLIENT_ID])] = reply.metadata.src_node_id
    return out
