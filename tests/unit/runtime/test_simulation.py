"""The in-process runtime: rounds, sampling, wire accounting, failures, evaluation."""

from __future__ import annotations

import pytest
import torch

from fedloom.algorithms.fedavg import FedAvg
from fedloom.errors import ConfigError
from fedloom.runs.workspace import prepare_workspace
from fedloom.runtime.communication import record_bytes
from fedloom.runtime.config import FederationConfig
from fedloom.runtime.simulation import InProcessRuntime
from tests.conftest import small_config


@pytest.fixture(scope="module")
def workspace():
    return prepare_workspace(small_config())


class Recording(FedAvg):
    """FedAvg that keeps what the server received, to check the runtime against it."""

    def __init__(self, local):
        super().__init__(local)
        self.received = []

    def aggregate(self, server, uploads, round):
        self.received.append(uploads)
        return super().aggregate(server, uploads, round)


def test_bytes_match_payload_sizes_and_server_gets_wire_rounded_uploads(workspace):
    algo = Recording(small_config().train)
    rt = InProcessRuntime(algo, workspace.learners, FederationConfig(), seed=0)
    result = rt.run(workspace.shared_init, rounds=1)
    rec = result.history[0]
    adapter_bytes = sum(v.numel() for v in workspace.shared_init.values()) * 2
    assert rec.download_bytes == {c: adapter_bytes for c in workspace.learners}
    assert rec.upload_bytes == {c: adapter_bytes + 8 for c in workspace.learners}  # + num_examples
    assert rec.bytes_by_group["upload"]["scalars"] == 8 * len(workspace.learners)
    for up in algo.received[0].values():
        for v in up.tensors.values():
            assert torch.equal(v, v.to(torch.bfloat16).float())
    assert record_bytes(next(iter(algo.received[0].values())), torch.bfloat16) == adapter_bytes + 8


def test_same_seed_same_result_different_seed_different(workspace):
    cfg = FederationConfig(eval_every=10)
    runs = [InProcessRuntime(FedAvg(small_config().train), workspace.learners, cfg, seed=s) for s in (0, 0, 1)]
    out = [r.run(workspace.shared_init, rounds=2).server.tensors for r in runs]
    assert all(torch.equal(out[0][k], out[1][k]) for k in out[0])
    assert any(not torch.equal(out[0][k], out[2][k]) for k in out[0])


def start(rt, init):
    """The server's initial state, with every client's initial state in the runtime's pool."""
    rt.pool.start(init, None)
    return rt.algorithm.init_server(init, rt.pool.ids)


def test_fraction_samples_clients_and_unsampled_clients_keep_their_state(workspace):
    rt = InProcessRuntime(FedAvg(small_config().train), workspace.learners, FederationConfig(fraction=0.34), seed=0)
    server = start(rt, workspace.shared_init)
    before = {c: dict(s.tensors) for c, s in rt.pool.states().items()}
    _, rec = rt.run_round(1, server)
    assert len(rec.selected) == 1
    after = rt.pool.states()
    for c in workspace.learners:
        same = all(torch.equal(before[c][k], after[c].tensors[k]) for k in before[c])
        assert same == (c not in rec.selected)


class Flaky(FedAvg):
    def local_update(self, download, state, ctx):
        if ctx.learner.client_id == "energy":
            raise RuntimeError("disk full")
        return super().local_update(download, state, ctx)


def test_a_failing_client_is_recorded_and_left_out(workspace):
    rt = InProcessRuntime(Flaky(small_config().train), workspace.learners, FederationConfig(), seed=0)
    server = start(rt, workspace.shared_init)
    new, rec = rt.run_round(1, server)
    assert rec.failures == {"energy": "RuntimeError: disk full"}
    assert "energy" not in rec.upload_bytes and rec.aggregated
    assert any(not torch.equal(new.tensors[k], server.tensors[k]) for k in server.tensors)


def test_too_few_successes_skip_aggregation(workspace):
    rt = InProcessRuntime(Flaky(small_config().train), workspace.learners, FederationConfig(min_clients=3), seed=0)
    server = start(rt, workspace.shared_init)
    new, rec = rt.run_round(1, server)
    assert not rec.aggregated and new is server


def test_evaluation_schedule_and_summaries(workspace):
    rt = InProcessRuntime(FedAvg(small_config().train), workspace.learners, FederationConfig(eval_every=2), seed=0)
    hist = rt.run(workspace.shared_init, rounds=3).history
    assert [r.evaluation is not None for r in hist] == [False, True, True]
    s = hist[-1].summary
    assert {"personal/test/ic/macro", "personal/test/mse/weighted", "personal/val/rank_ic/worst25"} <= set(s)
    # FedAvg: the global model is the personalized one; ``adapter``: how far it moved (val rows only)
    assert set(hist[-1].evaluation) == {"personal", "adapter"}
    assert set(hist[-1].evaluation["personal"]["test"]) == set(workspace.learners)
    movement = hist[-1].evaluation["adapter"]
    assert movement["test"] == {} and set(movement["val"]) == set(workspace.learners)
    assert all(v["delta_w_rel_max"] > 0 and v["contribution"] > 0 for v in movement["val"].values())


class Tampering(FedAvg):
    """FedAvg whose client ``energy`` sends a corrupted upload of the configured kind."""

    def __init__(self, local, kind):
        super().__init__(local)
        self.kind = kind

    def local_update(self, download, state, ctx):
        update = super().local_update(download, state, ctx)
        if ctx.learner.client_id != "energy":
            return update
        tensors = dict(update.upload.tensors)
        key = sorted(tensors)[0]
        if self.kind == "nan":
            tensors[key] = tensors[key].clone().fill_(float("nan"))
        elif self.kind == "shape":
            tensors[key] = tensors[key][:1]
        elif self.kind == "missing":
            del tensors[key]
        elif self.kind == "huge":
            tensors[key] = tensors[key] * 1e6 + 1e3
        return type(update)(type(update.upload)(tensors, update.upload.scalars), update.state, update.metrics)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("nan", "non-finite values"),
        ("shape", "has shape"),
        ("missing", "is missing"),
        ("huge", "exceeds the bound"),
    ],
)
def test_bad_uploads_are_rejected_and_never_aggregated(workspace, kind, reason):
    cfg = FederationConfig(max_update_norm=100.0)
    rt = InProcessRuntime(Tampering(small_config().train, kind), workspace.learners, cfg, seed=0)
    server = start(rt, workspace.shared_init)
    new, rec = rt.run_round(1, server)
    assert set(rec.rejected) == {"energy"} and reason in rec.rejected["energy"]
    # the server equals FedAvg over the two honest clients, computed by hand
    honest = InProcessRuntime(FedAvg(small_config().train), workspace.learners, FederationConfig(), seed=0)
    s2 = start(honest, workspace.shared_init)
    honest_ids = ["financials", "technology"]
    results = honest.pool.train(1, honest.algorithm.configure(s2, honest_ids, 1))
    ups = {cid: results[cid].upload for cid in honest_ids}
    n = {c: len(workspace.learners[c].data.train) for c in ups}
    for key in server.tensors:
        by_hand = sum(n[c] * ups[c].tensors[key].to(torch.bfloat16).float() for c in ups) / sum(n.values())
        torch.testing.assert_close(new.tensors[key], by_hand)


def test_clients_per_round(workspace):
    cfg = FederationConfig(clients_per_round=2)
    rt = InProcessRuntime(FedAvg(small_config().train), workspace.learners, cfg, seed=0)
    assert all(len(rt.sample(r)) == 2 for r in range(1, 6))


def test_min_clients_above_the_partition_is_refused_before_round_1(workspace):
    with pytest.raises(ConfigError, match="min_clients=4, but the partition has only 3 clients"):
        InProcessRuntime(FedAvg(small_config().train), workspace.learners, FederationConfig(min_clients=4), seed=0)


def test_shrunk_intercepts_share_the_federations_mean_before_round_1_and_count_its_bytes(workspace):
    """head_intercept: shrunk: every client's head starts from (μ, τ²) of the summed `MeanSums`; the exchange
    (five float64 sums up, two numbers down per client) is in round 1's bytes and diagnostics."""
    import copy

    from fedloom.tasks.intercept import MeanSums

    learners = {c: copy.copy(lrn) for c, lrn in workspace.learners.items()}
    for lrn in learners.values():
        lrn.head_intercept = "shrunk"
    rt = InProcessRuntime(FedAvg(small_config().train), learners, FederationConfig(), seed=0)
    plain = InProcessRuntime(FedAvg(small_config().train), workspace.learners, FederationConfig(), seed=0)
    (first,) = rt.run(workspace.shared_init, rounds=1).history
    (base,) = plain.run(workspace.shared_init, rounds=1).history
    expected = sum((lrn.mean_sums() for lrn in learners.values()), MeanSums()).federation_mean()
    assert all(lrn.federation_mean == expected for lrn in learners.values())
    assert first.diagnostics["federation_mean/mean"] == expected.mean
    assert first.diagnostics["federation_mean/clients"] == len(learners)
    assert {c: first.upload_bytes[c] - base.upload_bytes[c] for c in learners} == {c: 40 for c in learners}
    assert {c: first.download_bytes[c] - base.download_bytes[c] for c in learners} == {c: 16 for c in learners}
    assert first.bytes_by_group["upload"]["mean_sums"] == 40 * len(learners)
    assert "federation_mean/mean" not in base.diagnostics


def test_local_only_exchanges_nothing_and_keeps_each_clients_own_intercept(workspace):
    """Local-only communicates nothing, not even the intercepts' sums: with head_intercept: shrunk its clients
    start exactly where they start with their own intercepts, and no byte is counted."""
    import copy

    from fedloom.algorithms.local import LocalOnly

    learners = {c: copy.copy(lrn) for c, lrn in workspace.learners.items()}
    for lrn in learners.values():
        lrn.head_intercept = "shrunk"
    shrunk = InProcessRuntime(LocalOnly(small_config().train), learners, FederationConfig(), seed=0)
    own = InProcessRuntime(LocalOnly(small_config().train), workspace.learners, FederationConfig(), seed=0)
    (first,), (base,) = (rt.run(workspace.shared_init, rounds=1).history for rt in (shrunk, own))
    assert first.upload_bytes == base.upload_bytes and "federation_mean/mean" not in first.diagnostics
    assert first.summary == base.summary
