"""The server's side of a run on Flower (flwr 1.42): a client pool whose calls become messages.

The shared round loop (`fedloom.runtime.rounds.Runtime`) drives this pool exactly as it drives the
in-process one; each round's downloads go out as TRAIN messages through the Grid and the uploads
come back. The nodes answer with `fedloom.runtime.flower.node.Node`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.serverapp import Grid

from fedloom.algorithms.base import Record
from fedloom.errors import ConfigError
from fedloom.runtime.config import FederationConfig
from fedloom.runtime.flower.identity import claim, new_nonce, public_key, verify
from fedloom.runtime.flower.node import ASK, DOWNLOAD, FEDERATION_MEAN, IDENTITY, MEAN_SUMS, RUN, SERVER, TRAIN_SPLITS
from fedloom.runtime.flower.records import from_recorddict, to_recorddict
from fedloom.runtime.flower.secure import SECONDS, secure_round
from fedloom.runtime.rounds import EVAL_SPLITS, ClientResult, Evaluation, SecureRound, empty_evaluation
from fedloom.tasks.intercept import FederationMean, MeanSums

log = logging.getLogger("fedloom")


class FlowerClients:
    """A client pool on Flower nodes: each call becomes messages through the Grid.

    Nodes are mapped to client ids by asking them (QUERY); a node that reconnects gets a new node id
    and is found again at the start of the next round. Replies missing at ``round_timeout`` (a
    straggler, a killed node) count as that client's failure for the round.
    """

    def __init__(
        self, grid: Grid, config: str, federation: FederationConfig, run_key: str, num_nodes: int,
        connect_timeout: float,
    ) -> None:  # fmt: skip
        """``config``: the run's configuration as YAML, sent to every node with every message."""
        self.grid, self.config, self.federation, self.run_key = grid, config, federation, run_key
        self.wire = federation.wire
        self.timeout, self.connect_timeout = federation.round_timeout, connect_timeout
        self.nodes: dict[str, int] = {}
        self.info: dict[str, dict[str, Any]] = {}
        self.keys = {cid: public_key(spec, cid) for cid, spec in federation.identities.items()}
        self.refused: set[int] = set()  # nodes whose claim did not verify: not asked again (a fixed node reconnects)
        self.federation_mean: FederationMean | None = None  # sent with every message once shared
        deadline = time.monotonic() + connect_timeout
        while len(list(grid.get_node_ids())) < num_nodes:
            if time.monotonic() > deadline:
                have = len(list(grid.get_node_ids()))
                raise ConfigError(f"only {have} of {num_nodes} SuperNodes connected within {connect_timeout:.0f} s")
            time.sleep(0.2)
        self.refresh()
        self.ids = sorted(self.nodes)
        self.sizes = {s: {c: int(self.info[c][f"size/{s}"]) for c in self.ids} for s in EVAL_SPLITS}

    def run_record(self, rnd: int) -> ConfigRecord:
        record: dict[str, Any] = {"round": rnd, "config": self.config, "run_key": self.run_key}
        if self.federation_mean is not None:  # a node reads it whenever it starts its client's head
            record[FEDERATION_MEAN] = [self.federation_mean.mean, self.federation_mean.tau2]
        return ConfigRecord(record)

    def refresh(self) -> None:
        """Ask every node not yet known which client it is (with ``federation.identities``, a claim
        counts only if the node signed this query's nonce with that client's key)."""
        known = set(self.nodes.values()) | self.refused
        new = [n for n in self.grid.get_node_ids() if n not in known]
        if not new:
            return
        nonces = {n: new_nonce() for n in new}
        msgs = [
            Message(content=RecordDict({RUN: self.run_record(0), IDENTITY: ConfigRecord({"nonce": nonces[n]})}),
                    dst_node_id=n, message_type=MessageType.QUERY)
            for n in new
        ]  # fmt: skip
        for reply in self.grid.send_and_receive(msgs, timeout=self.connect_timeout):  # a first load can be slow
            node = reply.metadata.src_node_id
            if reply.has_error():
                log.warning("node %s could not say which client it is (%s); asked again next round",
                            node, reply.error.reason)  # fmt: skip
                continue
            try:
                cid, info, signature = client_info(reply.content)
            except ValueError as exc:  # before any use of what it claims: one bad node never stops the run
                log.warning("node %s sent a malformed QUERY reply (%s): left out", node, exc)
                self.refused.add(node)
                continue
            if self.keys and not self._proven(node, cid, nonces.get(node, ""), signature):
                self.refused.add(node)
                continue
            self.nodes[cid], self.info[cid] = node, info

    def _proven(self, node: int, cid: str, nonce: str, signature: str) -> bool:
        """Whether ``node`` signed its claim to be ``cid`` with ``cid``'s registered key; a refusal is logged."""
        key = self.keys.get(cid)
        if key is None:
            log.warning("node %s claims client %r, which has no key in federation.identities: refused", node, cid)
            return False
        if not signature or not verify(key, claim(self.run_key, cid, nonce), signature):
            log.warning("node %s claims client %r but did not sign with its registered key: refused", node, cid)
            return False
        return True

    def start(self, shared_init: Mapping[str, torch.Tensor], resume: Mapping[str, Record] | None) -> None:
        """Nothing to do: each node initializes (or finds on its disk) its own private state."""

    def states(self) -> dict[str, Record]:
        return {}  # private states stay on the nodes

    def mean_sums(self) -> dict[str, MeanSums]:
        """Each connected client's five sums (a QUERY asking for them); a node that fails or answers malformed
        numbers is logged and left out of the sums."""
        self.refresh()
        asks = {cid: RecordDict({ASK: ConfigRecord({"what": MEAN_SUMS})}) for cid in self.nodes}
        replies, errors = self._exchange(MessageType.QUERY, 0, asks)
        out = {}
        for cid in asks:
            if cid not in replies:
                log.warning("client %s sent no mean sums (%s): left out of the federation's mean", cid,
                            errors.get(cid, f"no reply within {self.timeout:g} s"))  # fmt: skip
                continue
            try:
                out[cid] = mean_sums_of(replies[cid])
            except ValueError as exc:
                log.warning("client %s sent malformed mean sums (%s): left out of the federation's mean", cid, exc)
        return out

    def share_federation_mean(self, federation: FederationMean) -> None:
        self.federation_mean = federation

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
            sender = by_node.get(reply.metadata.src_node_id)
            if sender is None:
                continue
            if reply.has_error():
                errors[sender] = f"error on the node: {reply.error.reason}"
            else:
                replies[sender] = reply.content
        return replies, errors

    def train(self, rnd: int, downloads: Mapping[str, Record]) -> dict[str, ClientResult]:
        contents, out = self._train_contents(downloads)
        replies, errors = self._exchange(MessageType.TRAIN, rnd, contents)
        for cid in contents:
            if cid in replies:
                out[cid] = _train_result(replies[cid])
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
        secure = self.federation.secure_aggregation
        max_weight = secure.max_weight or float(max(int(i["size/train"]) for i in self.info.values()))
        result = secure_round(self.grid, contents, self.nodes, secure, max_weight, rnd, self.timeout)
        return SecureRound({**missing, **result.clients}, result.mean)

    def evaluate(
        self, rnd: int, server: Record, downloads: Mapping[str, Record], splits: Sequence[str] = EVAL_SPLITS
    ) -> Evaluation:
        """The nodes' metrics on ``splits`` (a node evaluates both splits; the others are dropped here)."""
        exact = torch.float32  # evaluation inputs travel exactly: the same numbers as in process
        contents = {}
        for cid, download in downloads.items():
            if cid in self.nodes:
                content = to_recorddict(download, exact, DOWNLOAD)
                for key, value in to_recorddict(server, exact, SERVER).items():
                    content[key] = value
                contents[cid] = content
        replies, _ = self._exchange(MessageType.EVALUATE, rnd, contents)
        out = empty_evaluation(splits=splits)
        for cid, content in replies.items():
            try:
                values = [(*key.split("/", 2), float(v)) for key, v in content.metric_records["metrics"].items()]
                parsed = [(mode, split, metric, v) for mode, split, metric, v in values if split in splits]
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("round %d: client %s sent a malformed evaluation (%s); left out", rnd, cid, exc)
                continue
            for mode, split, metric, value in parsed:
                out.setdefault(mode, {s: {} for s in splits})[split].setdefault(cid, {})[metric] = value
        return out


def client_info(content: RecordDict) -> tuple[str, dict[str, Any], str]:
    """A QUERY reply's (client id, split sizes and task facts, signature), every field checked as a TRAIN
    reply is; ValueError names the first field that is missing or of the wrong type."""
    if "client" not in content.config_records:
        raise ValueError("no client record")
    info = dict(content.config_records["client"])
    expected: dict[str, tuple[type, ...]] = {"client_id": (str,), "primary_metric": (str,), "synthetic": (bool,),
                                             **{f"size/{s}": (int,) for s in TRAIN_SPLITS}}  # fmt: skip
    for key, kinds in expected.items():
        value = info.get(key)
        count = kinds == (int,)
        if not isinstance(value, kinds) or (count and (isinstance(value, bool) or int(value) < 0)):  # type: ignore[arg-type]
            raise ValueError(f"{key}={value!r}" if key in info else f"no {key}")
    if not info["client_id"]:
        raise ValueError("an empty client_id")
    signature = info.pop("signature", "")
    if not isinstance(signature, str):
        raise ValueError("a signature that is not text")
    return str(info.pop("client_id")), {k: info[k] for k in expected if k != "client_id"}, signature


def mean_sums_of(content: RecordDict) -> MeanSums:
    """A node's `MeanSums` reply, checked: five finite numbers, count 0 or 1, weights ≥ 0 (ValueError)."""
    if MEAN_SUMS not in content.config_records:
        raise ValueError("no mean sums record")
    record = content.config_records[MEAN_SUMS]
    values = [record.get(f) for f in MeanSums().as_dict()]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        raise ValueError(f"not five finite numbers: {values!r}")
    sums = MeanSums(*(float(v) for v in values))  # type: ignore[arg-type]
    if sums.count not in (0.0, 1.0) or min(sums.w, sums.wyy, sums.ww) < 0:
        raise ValueError(f"count {sums.count:g} (one client: 0 or 1) or a negative weight")
    return sums


def _train_result(content: RecordDict) -> ClientResult:
    """A TRAIN reply as the client's result; a missing or malformed record fails that client only."""
    try:
        metrics = {key: float(value) for key, value in content.metric_records["metrics"].items()}  # type: ignore[arg-type]
        seconds = metrics.pop(SECONDS, 0.0)
        return ClientResult(from_recorddict(content, DOWNLOAD), metrics, seconds=seconds)
    except (KeyError, TypeError, ValueError) as exc:
        return ClientResult(failure=f"malformed reply from the node: {type(exc).__name__} {exc}")
