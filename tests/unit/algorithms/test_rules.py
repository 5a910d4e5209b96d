"""Each method's published rule on hand-computed cases (algorithms.md), with a scripted learner.

The fake learner records what the algorithm asked for (trainable tensors, steps, regularizer,
gradient offsets, mixtures) and returns parameters moved by a known amount, so every server and
client formula can be checked by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.algorithms.base import NUM_EXAMPLES, LocalContext, Record
from fedloom.algorithms.config import (
    DittoConfig,
    FedDPAConfig,
    FedRepConfig,
    LocalTrainingConfig,
    RankConfig,
    ScaffoldConfig,
)
from fedloom.algorithms.ditto import PERSONAL, Ditto
from fedloom.algorithms.fedavg import MOMENTUM, FedAvg, Sharing
from fedloom.algorithms.feddpa import INSTANCES, LOCAL_SLOT, FedDPA
from fedloom.algorithms.fedex import fedex_aggregate
from fedloom.algorithms.fedrep import FedRep
from fedloom.algorithms.flexlora import FlexLoRA
from fedloom.algorithms.flora import FLoRA
from fedloom.algorithms.lora_math import delta_weight, stack_loras, svd_factors
from fedloom.algorithms.scaffold import CONTROL, Scaffold
from fedloom.backbone.lora import base_delta_key, lora_a_key, lora_b_key
from fedloom.tasks.learner import FitResult

LOCAL = LocalTrainingConfig(steps=4, lr=0.1, head_lr=0.2)
P0, P1 = "model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj"


def adapter(value: float = 1.0, rank: int = 2) -> dict[str, torch.Tensor]:
    return {
        lora_a_key(P0): torch.full((rank, 3), value),
        lora_b_key(P0): torch.full((4, rank), value),
        lora_a_key(P1): torch.full((rank, 3), value),
        lora_b_key(P1): torch.full((4, rank), value),
    }


@dataclass
class FakeLearner:
    """Moves every trainable tensor by ``shift`` per fit call and records the call."""

    num_train: int = 10
    shift: float = -0.5
    calls: list[dict] = field(default_factory=list)
    data: object = None

    def init_head(self, generator):
        return {"head.weight": torch.zeros(1, 4), "head.bias": torch.zeros(1)}

    def fit(self, params, optimization, steps, generator, regularizer=None, grad_offset=None, mixture=None):
        trainable = [k for g in optimization.groups for k in g.keys]
        self.calls.append(dict(trainable=trainable, steps=steps, regularizer=regularizer, grad_offset=grad_offset,
                               mixture=mixture, params=dict(params)))  # fmt: skip
        out = {k: (v + self.shift if k in trainable else v.clone()) for k, v in params.items()}
        return FitResult(out, loss=1.0, steps=steps, samples=steps)


def ctx(learner, rnd=1):
    return LocalContext(learner, rnd, torch.Generator().manual_seed(0))


def up(tensors, n):
    return Record(tensors, {NUM_EXAMPLES: n})


# FedAvgM (§1.3)
def test_fedavgm_server_momentum_by_hand():
    algo = FedAvg(LOCAL, server_momentum=0.9, server_lr=1.0)
    server = algo.init_server({"w": torch.tensor([1.0])}, ["a", "b"])
    assert torch.equal(server.tensors[MOMENTUM + "w"], torch.zeros(1))
    # round 1: mean upload 0.5 → Δ = 0.5, v = 0.5, θ = 0.5
    s1 = algo.aggregate(server, {"a": up({"w": torch.tensor([0.0])}, 1), "b": up({"w": torch.tensor([1.0])}, 1)}, 1)
    assert s1.tensors["w"].item() == pytest.approx(0.5) and s1.tensors[MOMENTUM + "w"].item() == pytest.approx(0.5)
    # round 2: mean upload 0.25 → Δ = 0.25, v = 0.9·0.5 + 0.25 = 0.7, θ = 0.5 − 0.7 = −0.2
    s2 = algo.aggregate(s1, {"a": up({"w": torch.tensor([0.25])}, 3)}, 2)
    assert s2.tensors["w"].item() == pytest.approx(-0.2) and s2.tensors[MOMENTUM + "w"].item() == pytest.approx(0.7)
    assert set(algo.configure(s2, ["a"], 3)["a"].tensors) == {"w"}  # momentum never leaves the server


def test_fedavgm_with_zero_momentum_and_unit_lr_is_fedavg():
    plain, m0 = FedAvg(LOCAL), FedAvg(LOCAL, server_momentum=0.0, server_lr=1.0)
    server = Record({"w": torch.tensor([2.0])})
    ups = {"a": up({"w": torch.tensor([0.0])}, 1), "b": up({"w": torch.tensor([4.0])}, 3)}
    assert (
        plain.aggregate(server, ups, 1).tensors["w"].item() == m0.aggregate(server, ups, 1).tensors["w"].item() == 3.0
    )


# FedProx (§1.4)
def test_fedprox_adds_the_proximal_term_on_shared_tensors():
    algo = FedAvg(LOCAL, prox_mu=0.2)
    learner = FakeLearner()
    download = Record(adapter(1.0))
    algo.local_update(download, algo.init_client(adapter(), learner, None), ctx(learner))
    reg = learner.calls[0]["regularizer"]
    moved = {k: v + 2.0 for k, v in adapter(1.0).items()}  # every shared scalar 2 away from θᵗ
    n = sum(v.numel() for v in moved.values())
    assert reg(moved).item() == pytest.approx(0.5 * 0.2 * 4 * n)
    assert FedAvg(LOCAL).local_update(download, Record(learner.init_head(None)), ctx(learner)) is not None
    assert learner.calls[-1]["regularizer"] is None


# SCAFFOLD option II (§1.5)
def test_scaffold_control_variates_by_hand():
    algo = Scaffold(LOCAL, ScaffoldConfig(server_lr=1.0))
    theta = {"w": torch.tensor([1.0])}
    server = algo.init_server(theta, ["a", "b", "c", "d"])
    server = Record({"w": torch.tensor([1.0]), CONTROL + "w": torch.tensor([0.3])}, dict(server.scalars))
    learner = FakeLearner(shift=-0.4)
    state = Record({**learner.init_head(None), CONTROL + "w": torch.tensor([0.1])})
    update = algo.local_update(algo.configure(server, ["a"], 1)["a"], state, ctx(learner))
    call = learner.calls[0]
    assert call["grad_offset"]["w"].item() == pytest.approx(0.3 - 0.1)  # c − c_i added to the gradient
    # y = θ − 0.4 ; c_i⁺ = c_i − c + (θ − y)/(K η) = 0.1 − 0.3 + 0.4/(4·0.1) = 0.8
    assert update.state.tensors[CONTROL + "w"].item() == pytest.approx(0.8)
    assert update.upload.tensors["w"].item() == pytest.approx(-0.4)  # Δy
    assert update.upload.tensors[CONTROL + "w"].item() == pytest.approx(0.7)  # Δc = 0.8 − 0.1
    other = up({"w": torch.tensor([-0.2]), CONTROL + "w": torch.tensor([0.1])}, 5)
    new = algo.aggregate(server, {"a": update.upload, "b": other}, 1)
    assert new.tensors["w"].item() == pytest.approx(1.0 + (-0.4 - 0.2) / 2)  # θ + η_g mean Δy (unweighted)
    assert new.tensors[CONTROL + "w"].item() == pytest.approx(0.3 + 2 / 4 * (0.7 + 0.1) / 2)  # c + |S|/N mean Δc


# FedPer (§1.6), FFA-LoRA (§2.2), FedSA-LoRA (§2.5): what is shared, trained, kept
@pytest.mark.parametrize(
    ("sharing", "uploaded", "kept", "frozen"),
    [
        (Sharing(personal_layers=1), {lora_a_key(P0), lora_b_key(P0)}, {lora_a_key(P1), lora_b_key(P1)}, set()),
        (Sharing(shared="B", frozen="A"), {lora_b_key(P0), lora_b_key(P1)}, {lora_a_key(P0), lora_a_key(P1)},
         {lora_a_key(P0), lora_a_key(P1)}),
        (Sharing(shared="A"), {lora_a_key(P0), lora_a_key(P1)}, {lora_b_key(P0), lora_b_key(P1)}, set()),
    ],
    ids=["fedper", "ffa-lora", "fedsa-lora"],
)  # fmt: skip
def test_sharing_rules(sharing, uploaded, kept, frozen):
    algo = FedAvg(LOCAL, sharing)
    server = algo.init_server(adapter(1.0), ["a"])
    assert set(server.tensors) == uploaded
    learner = FakeLearner()
    state = algo.init_client(adapter(1.0), learner, None)
    assert set(state.tensors) == kept | {"head.weight", "head.bias"}
    update = algo.local_update(algo.configure(server, ["a"], 1)["a"], state, ctx(learner))
    assert set(update.upload.tensors) == uploaded
    trained = set(learner.calls[0]["trainable"])
    assert trained == (uploaded | kept | {"head.weight", "head.bias"}) - frozen
    for key in frozen:  # FFA: A never moves from the shared init
        assert torch.equal(update.state.tensors[key], adapter(1.0)[key])


# FedRep (§1.7)
def test_fedrep_trains_the_head_then_the_body():
    algo = FedRep(LOCAL, FedRepConfig(head_fraction=0.75))
    learner = FakeLearner()
    server = algo.init_server(adapter(), ["a"])
    algo.local_update(algo.configure(server, ["a"], 1)["a"], algo.init_client(adapter(), learner, None), ctx(learner))
    first, second = learner.calls
    assert set(first["trainable"]) == {"head.weight", "head.bias"} and first["steps"] == 3
    assert set(second["trainable"]) == set(adapter()) and second["steps"] == 1
    assert torch.equal(second["params"]["head.weight"], first["params"]["head.weight"] - 0.5)  # head from phase 1


# Ditto (§1.8)
def test_ditto_personal_objective_and_models():
    algo = Ditto(LOCAL, DittoConfig(lam=0.3, personal_steps=2))
    learner = FakeLearner()
    server = algo.init_server(adapter(1.0), ["a"])
    state = algo.init_client(adapter(1.0), learner, None)
    update = algo.local_update(algo.configure(server, ["a"], 1)["a"], state, ctx(learner))
    global_call, personal_call = learner.calls
    assert global_call["regularizer"] is None and personal_call["steps"] == 2
    moved = {k: v + 1.0 for k, v in adapter(1.0).items()}
    n = sum(v.numel() for v in moved.values())
    assert personal_call["regularizer"](moved).item() == pytest.approx(0.5 * 0.3 * n)  # λ/2 ‖v − wᵗ‖²
    personal = algo.client_model(Record(), update.state).params
    assert torch.equal(personal[lora_a_key(P0)], update.state.tensors[PERSONAL + lora_a_key(P0)])
    glob = algo.global_model(server, update.state).params
    assert torch.equal(glob[lora_a_key(P0)], server.tensors[lora_a_key(P0)])


# FedEx-LoRA (§2.6): exactness, property-based
@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 5), r=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_fedex_global_update_is_the_exact_average_of_client_updates(k, r, seed):
    g = torch.Generator().manual_seed(seed)
    alpha = 4.0
    server = {lora_a_key(P0): torch.randn(r, 3, generator=g), lora_b_key(P0): torch.randn(4, r, generator=g),
              base_delta_key(P0): torch.randn(4, 3, generator=g)}  # fmt: skip
    uploads = [{lora_a_key(P0): torch.randn(r, 3, generator=g), lora_b_key(P0): torch.randn(4, r, generator=g)}
               for _ in range(k)]  # fmt: skip
    weights = (torch.rand(k, generator=g) + 0.1).tolist()
    new = fedex_aggregate(server, uploads, weights, alpha)
    effective = new[base_delta_key(P0)] + delta_weight(new[lora_a_key(P0)], new[lora_b_key(P0)], alpha)
    p = torch.tensor(weights) / sum(weights)
    exact = server[base_delta_key(P0)] + sum(
        p[i] * delta_weight(u[lora_a_key(P0)], u[lora_b_key(P0)], alpha) for i, u in enumerate(uploads)
    )
    torch.testing.assert_close(effective, exact, atol=1e-5, rtol=1e-5)


# FLoRA (§2.3)
@settings(max_examples=30, deadline=None)
@given(ranks=st.lists(st.integers(1, 4), min_size=1, max_size=4), seed=st.integers(0, 10_000))
def test_flora_stacking_reproduces_the_weighted_sum_of_client_updates(ranks, seed):
    g = torch.Generator().manual_seed(seed)
    As = [torch.randn(r, 5, generator=g) for r in ranks]
    Bs = [torch.randn(6, r, generator=g) for r in ranks]
    w = (torch.rand(len(ranks), generator=g) + 0.1).tolist()
    A, B = stack_loras(As, Bs, w)
    assert A.shape == (sum(ranks), 5) and B.shape == (6, sum(ranks))
    torch.testing.assert_close(
        B @ A, sum(wk * b @ a for wk, a, b in zip(w, As, Bs, strict=True)), atol=1e-5, rtol=1e-5
    )


def test_flora_round_heterogeneous_ranks_and_fresh_restart():
    algo = FLoRA(LOCAL, alpha=8.0, rank=2, cfg=RankConfig(ranks=[1, 3]))
    server = algo.init_server(adapter(1.0), ["b", "a"])
    downloads = algo.configure(server, ["a", "b"], 1)
    assert (downloads["a"].scalars["rank"], downloads["b"].scalars["rank"]) == (1, 3)
    learner = FakeLearner(shift=0.5)
    ups = {}
    for cid in ("a", "b"):
        upd = algo.local_update(downloads[cid], algo.init_client(adapter(), learner, None), ctx(learner))
        start = learner.calls[-1]["params"]
        assert torch.count_nonzero(start[lora_b_key(P0)]) == 0  # every round starts from a fresh LoRA
        assert start[lora_a_key(P0)].shape[0] == downloads[cid].scalars["rank"]
        assert algo.upload_spec(downloads[cid], cid).tensors.entries[0][1][0] == downloads[cid].scalars["rank"]
        ups[cid] = upd.upload
    new = algo.aggregate(server, ups, 1)
    expected = sum(0.5 * delta_weight(ups[c].tensors[lora_a_key(P0)], ups[c].tensors[lora_b_key(P0)], 8.0)
                   for c in ups)  # fmt: skip
    torch.testing.assert_close(new.tensors[base_delta_key(P0)], expected)


# FlexLoRA (§2.4)
@settings(max_examples=30, deadline=None)
@given(r=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_svd_factors_give_the_best_rank_r_approximation(r, seed):
    W = torch.randn(6, 5, generator=torch.Generator().manual_seed(seed))
    A, B = svd_factors(W, r, alpha=16.0)
    approx = delta_weight(A, B, 16.0)
    U, S, Vh = torch.linalg.svd(W)
    k = min(r, 5)
    torch.testing.assert_close(approx, (U[:, :k] * S[:k]) @ Vh[:k], atol=1e-4, rtol=1e-4)
    assert A.shape == (r, 5) and B.shape == (6, r)


def test_flexlora_redistributes_the_average_to_each_rank():
    algo = FlexLoRA(LOCAL, alpha=4.0, rank=2, cfg=RankConfig(ranks=[1, 2, 3]))
    server = algo.init_server(adapter(), ["a", "b", "c"])
    first = algo.configure(server, ["a", "b", "c"], 1)
    assert [first[c].tensors[lora_a_key(P0)].shape[0] for c in "abc"] == [1, 2, 3]
    g = torch.Generator().manual_seed(0)
    ups = {c: up({k: torch.randn(v.shape, generator=g) for k, v in first[c].tensors.items()}, n)
           for c, n in zip("abc", (1, 2, 3), strict=True)}  # fmt: skip
    new = algo.aggregate(server, ups, 1)
    W = sum(n / 6 * delta_weight(ups[c].tensors[lora_a_key(P0)], ups[c].tensors[lora_b_key(P0)], 4.0)
            for c, n in zip("abc", (1, 2, 3), strict=True))  # fmt: skip
    second = algo.configure(new, ["a", "c"], 2)
    A3, B3 = second["c"].tensors[lora_a_key(P0)], second["c"].tensors[lora_b_key(P0)]
    rank_w = int(torch.linalg.matrix_rank(W))
    if rank_w <= 3:
        torch.testing.assert_close(delta_weight(A3, B3, 4.0), W, atol=1e-4, rtol=1e-4)
    A1, B1 = second["a"].tensors[lora_a_key(P0)], second["a"].tensors[lora_b_key(P0)]
    U, S, Vh = torch.linalg.svd(W)
    torch.testing.assert_close(delta_weight(A1, B1, 4.0), S[0] * torch.outer(U[:, 0], Vh[0]), atol=1e-4, rtol=1e-4)


# FedDPA (§2.7)
def test_feddpa_local_step_mixes_and_trains_only_the_local_adapter():
    algo = FedDPA(LOCAL, FedDPAConfig(local_weight=0.3))
    learner = FakeLearner()
    server = algo.init_server(adapter(1.0), ["a"])
    state = algo.init_client(adapter(1.0), learner, torch.Generator().manual_seed(0))
    assert state.tensors[INSTANCES].dtype == torch.int64 and len(state.tensors[INSTANCES]) == 5
    algo.local_update(algo.configure(server, ["a"], 1)["a"], state, ctx(learner, rnd=1))
    assert len(learner.calls) == 1  # round 1: global step only
    learner.calls.clear()
    algo.local_update(algo.configure(server, ["a"], 2)["a"], state, ctx(learner, rnd=2))
    local_call, global_call = learner.calls
    assert all(f".{LOCAL_SLOT}." in k or k.startswith("head.") for k in local_call["trainable"])
    w = local_call["mixture"].weights(learner, {}, np.arange(3))
    assert local_call["mixture"].slots == ("default", LOCAL_SLOT)
    torch.testing.assert_close(w, torch.tensor([[0.7, 0.3]] * 3))
    assert set(global_call["trainable"]) == set(adapter()) | {"head.weight", "head.bias"}


def test_feddpa_test_time_weight_is_scaled_mean_cosine():
    algo = FedDPA(LOCAL, FedDPAConfig(max_weight=0.5))
    e_ref = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    e_x = torch.tensor([[1.0, 0.0], [1.0, 1.0]])

    class Stub:
        data = type("D", (), {"train": np.arange(10)})()

        def pooled(self, params, rows, mixture=None):
            assert mixture.slots == (LOCAL_SLOT,)
            return e_ref if len(rows) == 2 and rows[0] == 4 else e_x

    state = Record({INSTANCES: torch.tensor([4, 7])})
    model = algo.client_model(Record(), state)
    lam = model.mixture.weights(Stub(), {}, np.array([0, 1]))[:, 0]
    # x0: cos = (1, 0) → mean 0.5 → λ = 0.25 ; x1: cos = (0.707, 0.707) → λ = 0.354
    torch.testing.assert_close(lam, torch.tensor([0.25, 0.5 * 0.5**0.5]))


# FwdLLM (§2.10)
def test_fwdllm_forward_gradient_is_unbiased_on_a_quadratic():
    """E[(∇L·v) v] = ∇L for v ~ N(0, I): the estimator's mean over many draws approaches the gradient."""
    from fedloom.algorithms.config import FwdLLMConfig
    from fedloom.algorithms.fwdllm import FwdLLM

    target = {"w": torch.tensor([1.0, -2.0, 0.5])}

    class Quadratic:
        num_train = 4

        def fit(self, params, optimization, steps, generator, **kw):
            return FitResult(dict(params), 0.0, steps, steps)

        def batches(self, steps, generator, batch_size, **kw):
            return [np.arange(1)] * steps

        def loss(self, params, rows):
            return 0.5 * (params["w"] - target["w"]).pow(2).sum()

    algo = FwdLLM(LocalTrainingConfig(steps=4000), FwdLLMConfig(h=1e-3, perturbation_sampling=False), rounds=10)
    theta = {"w": torch.zeros(3)}
    download = algo.configure(algo.init_server(theta, ["a"]), ["a"], 1)["a"]
    update = algo.local_update(download, Record({}), LocalContext(Quadratic(), 1, torch.Generator().manual_seed(0)))
    estimate = update.upload.tensors["w"] / update.upload.scalars[NUM_EXAMPLES]
    torch.testing.assert_close(estimate, theta["w"] - target["w"], atol=0.15, rtol=0.0)
    assert update.upload.scalars["variance"] >= 0


def test_fwdllm_server_step_schedule_and_variance_revert():
    from fedloom.algorithms.config import FwdLLMConfig
    from fedloom.algorithms.fwdllm import CACHE, CACHED_N, GRAD, FwdLLM

    algo = FwdLLM(LOCAL, FwdLLMConfig(server_lr=1.0, warmup_ratio=0.2, var_threshold=0.5), rounds=10)
    assert [round(algo.learning_rate(t), 3) for t in (1, 2, 3, 10)] == [0.5, 1.0, 1.0, 0.125]
    server = algo.init_server({"w": torch.tensor([1.0])}, ["a"])
    noisy = {"a": Record({"w": torch.tensor([4.0])}, {NUM_EXAMPLES: 2, "variance": 0.9})}
    s1 = algo.aggregate(server, noisy, 1)
    assert s1.tensors["w"].item() == 1.0 and s1.tensors[CACHE + "w"].item() == 4.0 and s1.scalars[CACHED_N] == 2
    calm = {"a": Record({"w": torch.tensor([2.0])}, {NUM_EXAMPLES: 1, "variance": 0.1})}
    s2 = algo.aggregate(s1, calm, 2)  # pooled: (4 + 2) / (2 + 1) = 2; η_2 = 1
    assert s2.tensors["w"].item() == pytest.approx(1.0 - 2.0) and s2.tensors[GRAD + "w"].item() == pytest.approx(2.0)
    assert s2.tensors[CACHE + "w"].item() == 0.0 and s2.scalars[CACHED_N] == 0.0
