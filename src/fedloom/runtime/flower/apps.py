"""Flower ServerApp and the node's answers to its messages, around the shared round loop (flwr 1.42).

The ServerApp runs the same `Runtime` as the in-process default; its client pool, `FlowerClients`,
sends each round's downloads as TRAIN messages through the Grid and reads the uploads back. On each
node, `answer` is the whole client side: it builds the workspace from the configuration the server
sends, keeps the client's private state (heads, local adapters, routes...) in the node's own
directory, and replies with the method's upload only. Data, heads and private state never leave the
node. The ClientApp (`clientapp.py`) calls `answer` in its own process or relays to the node's
persistent worker (`worker.py`), which calls the same function.

Node config keys: ``partition-id`` (which client of the configured partition this node is; Flower's
simulation sets it) or ``client-id``; optional ``data-dir`` (the owner's datasets folder),
``state-dir`` (where private state is kept; default ``$FEDLOOM_CACHE/node-state``) and ``worker``
(the node worker's socket).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import yaml
from flwr.app import ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from safetensors.torch import load_file, save_file

from fedloom.algorithms.base import ClientUpdate, Record
from fedloom.algorithms.registry import build_algorithm
from fedloom.backbone.loading import cache_root
from fedloom.errors import ConfigError
from fedloom.experiments.config import RunConfig, dump_config
from fedloom.runtime.communication import wire_dtype
from fedloom.runtime.flower.records import from_recorddict, to_recorddict
from fedloom.runtime.flower.relay import decode
from fedloom.runtime.flower.secure import FITINS, MESSAGE, SECONDS, secure_fitres, secure_round
from fedloom.runtime.rounds import (
    EVAL_SPLITS,
    ClientResult,
    Evaluation,
    Runtime,
    SecureRound,
    empty_evaluation,
)
from fedloom.runtime.simulation import client_round, evaluate_client
from fedloom.seeding import generator

RUN = "run"  # ConfigRecord of every message: round, the run's configuration (YAML) and its key
DOWNLOAD, SERVER = "download", "server"
TRAIN_SPLITS = ("train", *EVAL_SPLITS)  # split sizes a node reports (train: SecAgg+'s largest weight)
NodeConfig = Mapping[str, Any]  # a SuperNode's --node-config
KEEP_WORKSPACES = 2  # workspaces (backbone + partitions) a process keeps, newest configs first
_WORKSPACES: dict[str, Any] = {}


# ---------------------------------------------------------------- client side


def node_workspace(cfg: RunConfig) -> Any:
    """This process's workspace for ``cfg`` (backbone, features, learners), built on first use."""
    from fedloom.experiments.runner import config_digest, prepare_workspace

    key = config_digest(cfg)
    if key not in _WORKSPACES:
        while len(_WORKSPACES) >= KEEP_WORKSPACES:  # a long-lived node worker serves run after run
            _WORKSPACES.pop(next(iter(_WORKSPACES)))
        _WORKSPACES[key] = prepare_workspace(cfg)
    return _WORKSPACES[key]


def node_config(content: RecordDict, node: NodeConfig) -> tuple[RunConfig, str]:
    """The run's configuration (with this node's data dir) and the client this node is."""
    raw = yaml.safe_load(str(content.config_records[RUN]["config"]))
    if "data-dir" in node:
        raw.setdefault("data", {})["data_dir"] = str(node["data-dir"])
    cfg = RunConfig.model_validate(raw)
    ids = sorted(node_workspace(cfg).learners)
    if "client-id" in node:
        cid = str(node["client-id"])
        if cid not in ids:
            raise ConfigError(f"node client-id {cid!r} is not one of the clients: {', '.join(ids)}")
        return cfg, cid
    pid = int(node.get("partition-id", -1))
    if not 0 <= pid < len(ids):
        raise ConfigError(f"node partition-id {pid} does not name one of the {len(ids)} clients")
    return cfg, ids[pid]


class NodeState:
    """A client's private state on its node's disk, one version per round (the last two kept), so a
    resumed server that replays round r finds the state the client had before r."""

    def __init__(self, node: NodeConfig, run_key: str, client: str) -> None:
        root = Path(str(node.get("state-dir", cache_root() / "node-state")))
        self.dir = root / run_key / client

    def load(self, before: int) -> Record | None:
        """The newest state saved after a round < ``before``, or None (first round of this client)."""
        rounds = sorted(r for r in self._rounds() if r < before)
        if not rounds:
            return None
        path = self.dir / f"round-{rounds[-1]:05d}"
        scalars = json.loads((path / "scalars.json").read_text())
        return Record(load_file(path / "tensors.safetensors"), scalars)

    def save(self, rnd: int, state: Record) -> None:
        path = self.dir / f"round-{rnd:05d}"
        tmp = self.dir / f".tmp-{rnd:05d}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        save_file({k: v.contiguous() for k, v in state.tensors.items()}, tmp / "tensors.safetensors")
        (tmp / "scalars.json").write_text(json.dumps(dict(state.scalars)))
        if path.exists():
            _remove(path)
        tmp.rename(path)
        for old in sorted(self._rounds())[:-2]:
            _remove(self.dir / f"round-{old:05d}")

    def _rounds(self) -> list[int]:
        if not self.dir.is_dir():
            return []
        return [int(p.name.split("-")[1]) for p in self.dir.glob("round-*")]


def _remove(path: Path) -> None:
    for f in path.iterdir():
        f.unlink()
    path.rmdir()


def _client_state(
    content: RecordDict, node: NodeConfig, rnd: int
) -> tuple[RunConfig, Any, str, Any, NodeState, Record]:
    cfg, cid = node_config(content, node)
    ws = node_workspace(cfg)
    algorithm = build_algorithm(cfg.method, cfg.build_context(ws.lm.layout.slot()))
    store = NodeState(node, str(content.config_records[RUN]["run_key"]), cid)
    state = store.load(before=rnd)
    if state is None:
        state = algorithm.init_client(ws.shared_init, ws.learners[cid], generator(cfg.seed, "init", cid))
    return cfg, ws, cid, algorithm, store, state


def answer_query(content: RecordDict, node: NodeConfig) -> RecordDict:
    """Which client this node is, its split sizes and primary metric."""
    cfg, cid = node_config(content, node)
    ws = node_workspace(cfg)
    learner = ws.learners[cid]
    info = {
        "client_id": cid,
        "primary_metric": learner.task.primary_metric,
        "synthetic": bool(getattr(ws.table, "synthetic", False)),
        **{f"size/{s}": len(learner.data.split(s)) for s in TRAIN_SPLITS},
    }
    return RecordDict({"client": ConfigRecord(info)})


def _local_round(content: RecordDict, node: NodeConfig) -> tuple[RunConfig, Any, ClientUpdate]:
    """This client's local round for a TRAIN message; its new private state stays on this node."""
    rnd = int(content.config_records[RUN]["round"])
    cfg, ws, cid, algorithm, store, state = _client_state(content, node, rnd)
    download = from_recorddict(content, DOWNLOAD)
    update = client_round(algorithm, ws.learners[cid], download, state, cfg.seed, rnd)
    store.save(rnd, update.state)  # private: float32, on this node only
    return cfg, algorithm, update


def answer_train(content: RecordDict, node: NodeConfig) -> RecordDict:
    """One local round: the method's upload back (under SecAgg+, its secure form, to be masked)."""
    t0 = time.perf_counter()
    if FITINS in content.config_records:  # a SecAgg+ round: our message inside the legacy FitIns
        inner = decode(bytes(content.config_records[FITINS][MESSAGE]))  # type: ignore[arg-type]
        _, algorithm, update = _local_round(inner, node)
        metrics = {k: float(v) for k, v in update.metrics.items()}
        return secure_fitres(algorithm.secure_upload(update.upload), metrics, time.perf_counter() - t0)
    cfg, _, update = _local_round(content, node)
    reply = to_recorddict(update.upload, wire_dtype(cfg.federation.wire_dtype), DOWNLOAD)
    metrics = {k: float(v) for k, v in update.metrics.items()}
    reply["metrics"] = MetricRecord({**metrics, SECONDS: time.perf_counter() - t0})
    return reply


def answer_evaluate(content: RecordDict, node: NodeConfig) -> RecordDict:
    """Metrics of this client's model after the message's round; nothing else goes back."""
    rnd = int(content.config_records[RUN]["round"])
    _, ws, cid, algorithm, _, state = _client_state(content, node, rnd + 1)  # the state after round rnd
    server, download = from_recorddict(content, SERVER), from_recorddict(content, DOWNLOAD)
    result = evaluate_client(algorithm, ws.learners[cid], server, download, state)
    flat = {f"{mode}/{split}/{m}": float(v) for mode, per in result.items() for split, vs in per.items()
            for m, v in vs.items()}  # fmt: skip
    return RecordDict({"metrics": MetricRecord(flat)})


ANSWERS: dict[str, Callable[[RecordDict, NodeConfig], RecordDict]] = {
    MessageType.QUERY: answer_query,
    MessageType.TRAIN: answer_train,
    MessageType.EVALUATE: answer_evaluate,
}


def answer(kind: str, content: RecordDict, node: NodeConfig) -> RecordDict:
    """This node's reply to a message of type ``kind`` (``query``, ``train`` or ``evaluate``)."""
    if kind not in ANSWERS:
        raise ValueError(f"fedloom nodes answer {', '.join(ANSWERS)} messages, not {kind!r}")
    return ANSWERS[kind](content, node)


# ---------------------------------------------------------------- server side


class FlowerClients:
    """A client pool on Flower nodes: each call becomes messages through the Grid.

    Nodes are mapped to client ids by asking them (QUERY); a node that reconnects gets a new node id
    and is found again at the start of the next round. Replies missing at ``round_timeout`` (a
    straggler, a killed node) count as that client's failure for the round.
    """

    def __init__(self, grid: Grid, cfg: RunConfig, run_key: str, num_nodes: int, connect_timeout: float) -> None:
        self.grid, self.cfg, self.run_key = grid, cfg, run_key
        self.wire = wire_dtype(cfg.federation.wire_dtype)
        self.timeout, self.connect_timeout = cfg.federation.round_timeout, connect_timeout
        self.nodes: dict[str, int] = {}
        self.info: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + connect_timeout
        while len(grid.get_node_ids()) < num_nodes:
            if time.monotonic() > deadline:
                have = len(grid.get_node_ids())
                raise ConfigError(f"only {have} of {num_nodes} SuperNodes connected within {connect_timeout:.0f} s")
            time.sleep(0.2)
        self.refresh()
        self.ids = sorted(self.nodes)
        self.sizes = {s: {c: int(self.info[c][f"size/{s}"]) for c in self.ids} for s in EVAL_SPLITS}

    def run_record(self, rnd: int) -> ConfigRecord:
        return ConfigRecord({"round": rnd, "config": dump_config(self.cfg), "run_key": self.run_key})

    def refresh(self) -> None:
        """Ask every node not yet known which client it is."""
        known = set(self.nodes.values())
        new = [n for n in self.grid.get_node_ids() if n not in known]
        if not new:
            return
        msgs = [
            Message(content=RecordDict({RUN: self.run_record(0)}), dst_node_id=n, message_type=MessageType.QUERY)
            for n in new
        ]
        for reply in self.grid.send_and_receive(msgs, timeout=self.connect_timeout):  # a first load can be slow
            if reply.has_error():
                continue
            info = dict(reply.content.config_records["client"])
            self.nodes[str(info["client_id"])] = reply.metadata.src_node_id
            self.info[str(info["client_id"])] = info

    def start(self, shared_init: Mapping[str, torch.Tensor], resume: Mapping[str, Record] | None) -> None:
        """Nothing to do: each node initializes (or finds on its disk) its own private state."""

    def states(self) -> dict[str, Record]:
        return {}  # private states stay on the nodes

    def _train_contents(
        self, downloads: Mapping[str, Record]
    ) -> tuple[dict[str, RecordDict], dict[str, ClientResult]]:
        """The TRAIN content of each connected client's download, and a failure for each one not connected."""
        missing = {cid: ClientResult(failure="client not connected") for cid in downloads if cid not in self.nodes}
        contents = {cid: to_recorddict(d, self.wire, DOWNLOAD) for cid, d in downloads.items() if cid in self.nodes}
        return contents, missing

    def _exchange(self, kind: str, rnd: int, contents: Mapping[str, RecordDict]) -> tuple[dict, dict]:
        self.refresh()
        messages, by_node, run = [], {}, self.run_record(rnd)
        for cid, content in contents.items():
            content[RUN] = run
            messages.append(
                Message(content=content, dst_node_id=self.nodes[cid], message_type=kind, group_id=str(rnd))
            )
            by_node[self.nodes[cid]] = cid
        replies, errors = {}, {}
        for reply in self.grid.send_and_receive(messages, timeout=self.timeout):
            cid = by_node.get(reply.metadata.src_node_id)
            if cid is None:
                continue
            if reply.has_error():
                errors[cid] = f"error on the node: {reply.error.reason}"
            else:
                replies[cid] = reply.content
        return replies, errors

    def train(self, rnd: int, downloads: Mapping[str, Record]) -> dict[str, ClientResult]:
        contents, out = self._train_contents(downloads)
        replies, errors = self._exchange(MessageType.TRAIN, rnd, contents)
        for cid in contents:
            if cid in replies:
                metrics = dict(replies[cid].metric_records["metrics"])
                seconds = float(metrics.pop(SECONDS, 0.0))
                out[cid] = ClientResult(from_recorddict(replies[cid], DOWNLOAD), metrics, seconds=seconds)
            else:
                out[cid] = ClientResult(failure=errors.get(cid, f"no reply within {self.timeout:g} s"))
        return out

    def secure_train(self, rnd: int, downloads: Mapping[str, Record]) -> SecureRound:
        """A SecAgg+ round through Flower's workflow: the uploads come back masked, the mean only."""
        self.refresh()
        contents, missing = self._train_contents(downloads)
        run = self.run_record(rnd)
        for content in contents.values():
            content[RUN] = run
        secure = self.cfg.federation.secure_aggregation
        max_weight = secure.max_weight or float(max(int(i["size/train"]) for i in self.info.values()))
        result = secure_round(self.grid, contents, self.nodes, secure, max_weight, rnd, self.timeout)
        return SecureRound({**missing, **result.clients}, result.mean)

    def evaluate(self, rnd: int, server: Record, downloads: Mapping[str, Record]) -> Evaluation:
        exact = torch.float32  # evaluation inputs travel exactly: the same numbers as in process
        contents = {}
        for cid, download in downloads.items():
            if cid in self.nodes:
                content = to_recorddict(download, exact, DOWNLOAD)
                for key, value in to_recorddict(server, exact, SERVER).items():
                    content[key] = value
                contents[cid] = content
        replies, _ = self._exchange(MessageType.EVALUATE, rnd, contents)
        out = empty_evaluation()
        for cid, content in replies.items():
            for key, value in content.metric_records["metrics"].items():
                mode, split, metric = key.split("/", 2)
                out.setdefault(mode, {s: {} for s in EVAL_SPLITS})[split].setdefault(cid, {})[metric] = float(value)
        return out


def serve(grid: Grid, cfg: RunConfig, out: Path, num_nodes: int, resume: bool = False,
          connect_timeout: float = 600.0) -> dict[str, Any]:  # fmt: skip
    """The ServerApp's work: the shared round loop over Flower nodes, writing ``out`` like `fedloom run`."""
    from fedloom.experiments.runner import finish_run, load_adapted, run_rounds

    out.mkdir(parents=True, exist_ok=True)
    key_file = out / "flower.json"
    if resume and key_file.is_file():
        run_key = json.loads(key_file.read_text())["run_key"]
    else:  # a fresh run never sees private state left on the nodes by an earlier one
        run_key = uuid.uuid4().hex
        key_file.write_text(json.dumps({"run_key": run_key}))
    lm = load_adapted(cfg)
    shared_init = lm.layout.init_slot(generator(cfg.seed, "adapter-init"))
    algorithm = build_algorithm(cfg.method, cfg.build_context(lm.layout.slot(), lm))
    pool = FlowerClients(grid, cfg, run_key, num_nodes, connect_timeout)
    info = next(iter(pool.info.values()))
    runtime = Runtime(algorithm, pool, cfg.federation, cfg.seed)
    env = {"runtime": "flower", "nodes": dict(pool.nodes)}
    _, summary = run_rounds(cfg, runtime, lm, shared_init, out, str(info["primary_metric"]),
                            bool(info["synthetic"]), env, resume)  # fmt: skip
    finish_run(out, summary)
    return summary


def make_server_app(
    cfg: RunConfig, num_nodes: int, out: Path, resume: bool = False, result: dict[str, Any] | None = None
) -> ServerApp:
    """A ServerApp bound to one configuration (Python API: ``flwr.simulation.run_simulation``)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        summary = serve(grid, cfg, out, num_nodes, resume)
        if result is not None:
            result["summary"] = summary

    return app
