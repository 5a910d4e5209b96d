"""A Flower node's side of a run: which client it is, its private state on its own disk, and its
answers to the server's QUERY, TRAIN and EVALUATE messages (flwr 1.42).

Data, heads and private state never leave the node: a TRAIN reply carries the method's upload only,
an EVALUATE reply metrics only. What the node trains with — the method, the learners, the shared
initialization — comes from a `Federations` source the composition layer supplies, built from the
run's configuration that every message carries.

Node config keys: ``partition-id`` (which client of the configured partition this node is; Flower's
simulation sets it) or ``client-id``; optional ``data-dir`` (the owner's datasets folder, applied
by the source), ``state-dir`` (where private state is kept; default ``$FEDLOOM_CACHE/node-state``)
``worker`` (the node worker's socket) and ``identity-key`` (the owner's private key: the node signs
the server's QUERY nonce with it, `fedloom.runtime.flower.identity`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from flwr.app import ConfigRecord, MessageType, MetricRecord, RecordDict
from safetensors.torch import load_file, save_file

from fedloom.algorithms.base import Algorithm, ClientUpdate, Record
from fedloom.errors import NodeRefusedError
from fedloom.paths import cache_root
from fedloom.runtime.flower.identity import claim, sign
from fedloom.runtime.flower.records import from_recorddict, to_recorddict
from fedloom.runtime.flower.relay import decode
from fedloom.runtime.flower.secure import FITINS, MESSAGE, SECONDS, secure_fitres
from fedloom.runtime.rounds import EVAL_SPLITS
from fedloom.runtime.simulation import client_round, evaluate_client
from fedloom.seeding import generator
from fedloom.tasks.intercept import FederationMean
from fedloom.tasks.learner import Learner

log = logging.getLogger(__name__)
RUN_KEY = re.compile(r"[0-9a-f]{32}")
RUN = "run"  # ConfigRecord of every message: round, the run's configuration (YAML) and its key
IDENTITY = "identity"  # ConfigRecord of a QUERY: the nonce a node signs to prove which client it is
DOWNLOAD, SERVER = "download", "server"
ASK, MEAN_SUMS = "ask", "mean_sums"  # a QUERY asking for the client's `MeanSums` (``train.head_intercept: shrunk``)
FEDERATION_MEAN = "federation_mean"  # RUN key: the federation's [μ, τ²], once the server has shared it
TRAIN_SPLITS = ("train", *EVAL_SPLITS)  # split sizes a node reports (train: SecAgg+'s largest weight)
NodeConfig = Mapping[str, Any]  # a SuperNode's --node-config


@dataclass(frozen=True)
class Federation:
    """One run as a node sees it: the method's client half, every client's learner (the node is one of
    them), the shared adapter initialization, the run seed and the wire dtype of uploads."""

    algorithm: Algorithm
    learners: Mapping[str, Learner]
    shared_init: Mapping[str, torch.Tensor]
    seed: int
    wire: torch.dtype
    synthetic: bool


# the run's configuration (YAML text) and this node's config → the run on this node
Federations = Callable[[str, NodeConfig], Federation]


def client_id(federation: Federation, node: NodeConfig) -> str:
    """The client this node is: its ``client-id``, or the ``partition-id``-th of the sorted client ids."""
    ids = sorted(federation.learners)
    if "client-id" in node:
        cid = str(node["client-id"])
        if cid not in ids:
            log.warning("node client-id %r is not one of the clients: %s", cid, ", ".join(ids))
            raise NodeRefusedError(f"this node's client-id is not one of the run's {len(ids)} clients")
        return cid
    pid = int(node.get("partition-id", -1))
    if not 0 <= pid < len(ids):
        raise NodeRefusedError(f"node partition-id {pid} does not name one of the {len(ids)} clients")
    return ids[pid]


class NodeFailedError(RuntimeError):
    """A node failed to answer; the message says only which exception, the node's log says why."""


class NodeState:
    """A client's private state on its node's disk, one version per round (the last two kept), so a
    resumed server that replays round r finds the state the client had before r."""

    def __init__(self, node: NodeConfig, run_key: str, client: str) -> None:
        if not RUN_KEY.fullmatch(run_key):  # the server's uuid4().hex: never a path of its own
            raise NodeRefusedError("the run key is not 32 lowercase hex digits")
        root = Path(str(node.get("state-dir", cache_root() / "node-state")))
        self.dir = root / run_key / f"client-{hashlib.sha256(client.encode()).hexdigest()[:16]}"  # ids may hold '/'

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


class Node:
    """This node's answers, given where its runs come from."""

    def __init__(self, federations: Federations) -> None:
        self.federations = federations

    def answer(self, kind: str, content: RecordDict, node: NodeConfig) -> RecordDict:
        """This node's reply to a message of type ``kind`` (``query``, ``train`` or ``evaluate``).

        What fails goes back to the coordinator as a refusal that names config keys only (`NodeRefusedError`)
        or as the bare exception type: an error message may quote the node's files, paths or data rows,
        so it stays in the node's own log."""
        answers = {MessageType.QUERY: self.query, MessageType.TRAIN: self.train, MessageType.EVALUATE: self.evaluate}
        if kind not in answers:
            raise NodeRefusedError(f"fedloom nodes answer {', '.join(answers)} messages, not {kind!r}")
        try:
            return answers[kind](content, node)
        except NodeRefusedError as exc:
            log.warning("refused a %s message: %s", kind, exc)
            raise
        except Exception as exc:
            log.exception("answering a %s message failed", kind)
            raise NodeFailedError(f"{type(exc).__name__} while answering a {kind} message; the node's owner has "
                              "the details in its log") from None  # fmt: skip

    def query(self, content: RecordDict, node: NodeConfig) -> RecordDict:
        """Which client this node is, its split sizes and primary metric; or, asked for them, the five sums
        of its training targets' mean (`fedloom.tasks.intercept`)."""
        fed = self._federation(content, node)
        cid = client_id(fed, node)
        learner = fed.learners[cid]
        if ASK in content.config_records and content.config_records[ASK].get("what") == MEAN_SUMS:
            return RecordDict({MEAN_SUMS: ConfigRecord(dict[str, Any](learner.mean_sums().as_dict()))})
        info: dict[str, Any] = {
            "client_id": cid,
            "primary_metric": learner.task.primary_metric,
            "synthetic": fed.synthetic,
            **{f"size/{s}": len(learner.data.split(s)) for s in TRAIN_SPLITS},
        }
        if "identity-key" in node and IDENTITY in content.config_records:  # prove the claim with the owner's key
            nonce = str(content.config_records[IDENTITY]["nonce"])
            run_key = str(content.config_records[RUN]["run_key"])
            info["signature"] = sign(str(node["identity-key"]), claim(run_key, cid, nonce))
        return RecordDict({"client": ConfigRecord(info)})

    def train(self, content: RecordDict, node: NodeConfig) -> RecordDict:
        """One local round: the method's upload back (under SecAgg+, its secure form, to be masked)."""
        t0 = time.perf_counter()
        if FITINS in content.config_records:  # a SecAgg+ round: our message inside the legacy FitIns
            inner = decode(bytes(content.config_records[FITINS][MESSAGE]))  # type: ignore[arg-type]
            fed, update = self._local_round(inner, node)
            metrics = {k: float(v) for k, v in update.metrics.items()}
            return secure_fitres(fed.algorithm.secure_upload(update.upload), metrics, time.perf_counter() - t0)
        fed, update = self._local_round(content, node)
        reply = to_recorddict(update.upload, fed.wire, DOWNLOAD)
        metrics = {k: float(v) for k, v in update.metrics.items()}
        reply["metrics"] = MetricRecord({**metrics, SECONDS: time.perf_counter() - t0})
        return reply

    def evaluate(self, content: RecordDict, node: NodeConfig) -> RecordDict:
        """Metrics of this client's model after the message's round; nothing else goes back."""
        rnd = int(content.config_records[RUN]["round"])  # type: ignore[arg-type]
        fed, cid, _, state = self._client_state(content, node, rnd + 1)  # the state after round rnd
        server, download = from_recorddict(content, SERVER), from_recorddict(content, DOWNLOAD)
        result = evaluate_client(fed.algorithm, fed.learners[cid], server, download, state)
        flat: dict[str, Any] = {f"{mode}/{split}/{m}": float(v) for mode, per in result.items()
                                for split, vs in per.items() for m, v in vs.items()}  # fmt: skip
        return RecordDict({"metrics": MetricRecord(flat)})

    def _federation(self, content: RecordDict, node: NodeConfig) -> Federation:
        return self.federations(str(content.config_records[RUN]["config"]), node)

    def _client_state(
        self, content: RecordDict, node: NodeConfig, rnd: int
    ) -> tuple[Federation, str, NodeState, Record]:
        fed = self._federation(content, node)
        cid = client_id(fed, node)
        store = NodeState(node, str(content.config_records[RUN]["run_key"]), cid)
        state = store.load(before=rnd)
        if state is None:
            shared = content.config_records[RUN].get(FEDERATION_MEAN)
            if shared is not None:
                mean, tau2 = (float(v) for v in shared)  # type: ignore[union-attr]
                fed.learners[cid].federation_mean = FederationMean(mean, tau2)
            state = fed.algorithm.init_client(fed.shared_init, fed.learners[cid], generator(fed.seed, "init", cid))
        return fed, cid, store, state

    def _local_round(self, content: RecordDict, node: NodeConfig) -> tuple[Federation, ClientUpdate]:
        """This client's local round for a TRAIN message; its new private state stays on this node."""
        rnd = int(content.config_records[RUN]["round"])  # type: ignore[arg-type]
        fed, cid, store, state = self._client_state(content, node, rnd)
        download = from_recorddict(content, DOWNLOAD)
        update = client_round(fed.algorithm, fed.learners[cid], download, state, fed.seed, rnd)
        store.save(rnd, update.state)  # private: float32, on this node only
        return fed, update
