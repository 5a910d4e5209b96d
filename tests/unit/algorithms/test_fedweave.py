"""FedWeave: alignment on planted signatures, the interleaved schedule, asymmetric aggregation by
hand, sparse top-1 = the chosen expert alone, task labels never read, runs on the tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.algorithms.base import NUM_EXAMPLES, Record
from fedloom.algorithms.config import FedWeaveConfig, LocalTrainingConfig
from fedloom.algorithms.fedweave import FedWeave
from fedloom.algorithms.fedweave.algorithm import EXPERTS, STAGE, TRAIN
from fedloom.algorithms.fedweave.alignment import align, signature_distances
from fedloom.algorithms.fedweave.router import FC2_B, ROUTER
from fedloom.algorithms.fedweave.schedule import allocate_steps, interleave
from fedloom.algorithms.registry import build_algorithm
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.lora import Binding, lora_a_key, lora_b_key
from fedloom.runs.methods import method_context


def test_alignment_recovers_planted_groups():
    g = torch.Generator().manual_seed(0)
    centres = [{"m1": torch.randn(8, 4, generator=g), "m2": torch.randn(6, 4, generator=g)} for _ in range(3)]
    signatures, truth = [], []
    for k, c in enumerate(centres):
        for _ in range(5):  # five buckets per group, noisy copies of the group's signature
            signatures.append({n: v + 0.15 * torch.randn(v.shape, generator=g) for n, v in c.items()})
            truth.append(k)
    labels = align(signature_distances(signatures), [2, 3, 4, 5, 6])
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(truth, labels) == 1.0 and len(set(labels)) == 3


def test_signature_distance_is_mean_one_minus_cosine():
    a = {"m": torch.tensor([[1.0, 0.0]]), "n": torch.tensor([[1.0, 1.0]])}
    b = {"m": torch.tensor([[0.0, 2.0]]), "n": torch.tensor([[2.0, 2.0]])}
    d = signature_distances([a, b])
    assert d[0, 1] == pytest.approx((1.0 + 0.0) / 2) and d[0, 0] == 0.0


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 50), min_size=1, max_size=6).filter(lambda s: any(s)), extra=st.integers(0, 20))
def test_schedule_respects_budget_and_minimums(sizes, extra):
    budget = sum(1 for s in sizes if s) + extra
    steps = allocate_steps(sizes, budget)
    assert sum(steps) == budget
    assert all((n >= 1) == (s > 0) for n, s in zip(steps, sizes, strict=True))
    order = interleave(steps)
    assert sorted(order) == sorted(c for c, n in enumerate(steps) for _ in range(n))
    with pytest.raises(ValueError, match="cannot give each"):
        allocate_steps(sizes, sum(1 for s in sizes if s) - 1)


P0 = "model.layers.0.self_attn.q_proj"
LAYOUT = TensorLayout(((lora_a_key(P0), (2, 3)), (lora_b_key(P0), (4, 2))))


def _expert(m: int, v: float) -> dict[str, torch.Tensor]:
    return {lora_a_key(P0, f"e{m}"): torch.full((2, 3), v), lora_b_key(P0, f"e{m}"): torch.full((4, 2), v)}


def test_asymmetric_aggregation_by_hand():
    algo = FedWeave(LocalTrainingConfig(), FedWeaveConfig(), seed=0, layout=LAYOUT)
    router = {ROUTER + "w": torch.zeros(1)}
    server = Record({**_expert(0, 0.0), **_expert(1, 0.0), **router}, {STAGE: TRAIN, EXPERTS: 2})
    # client a: 30 rows aligned to expert 0, 10 to expert 1; client b: 20 rows, all expert 1
    ua = Record({**_expert(0, 1.0), **_expert(1, 2.0), ROUTER + "w": torch.tensor([4.0])},
                {NUM_EXAMPLES: 40, "n/0": 30, "n/1": 10})  # fmt: skip
    ub = Record({**_expert(1, 5.0), ROUTER + "w": torch.tensor([1.0])}, {NUM_EXAMPLES: 20, "n/0": 0, "n/1": 20})
    new = algo.aggregate(server, {"a": ua, "b": ub}, 2)
    assert new.tensors[lora_a_key(P0, "e0")][0, 0].item() == pytest.approx(1.0)  # only a routed rows to e0
    assert new.tensors[lora_a_key(P0, "e1")][0, 0].item() == pytest.approx((10 * 2.0 + 20 * 5.0) / 30)
    assert new.tensors[ROUTER + "w"].item() == pytest.approx((40 * 4.0 + 20 * 1.0) / 60)  # router by client size


def test_top1_equals_running_only_the_chosen_expert(tiny_lm):
    from fedloom.algorithms.fedweave.router import init_router, route

    g = torch.Generator().manual_seed(0)
    layout = tiny_lm.layout.slot()
    algo = FedWeave(LocalTrainingConfig(), FedWeaveConfig(router_hidden=16),
                    seed=0, layout=layout)  # fmt: skip
    experts = {}
    for m in range(3):
        experts.update(
            {k.replace(".default.", f".e{m}."): torch.randn(s, generator=g) * 0.3 for k, s in layout.entries}
        )
    router = init_router(tiny_lm.hidden_size, 3, 16, g)
    emb = torch.randn(5, tiny_lm.hidden_size, generator=g)
    weights = route(router, emb)
    mixture = algo.mixture(3, top_k=1)
    x = torch.randn(5, 7, tiny_lm.hidden_size, generator=g)
    mask = torch.ones(5, 7, dtype=torch.long)
    sparse = tiny_lm.pooled_from_prefix(x, mask, Binding(experts, mixture.slots, weights, top_k=1))
    chosen = weights.argmax(1)
    for i in range(5):
        only = {
            k.replace(f".e{int(chosen[i])}.", ".default."): v
            for k, v in experts.items()
            if f".e{int(chosen[i])}." in k
        }
        alone = tiny_lm.pooled_from_prefix(x[i : i + 1], mask[i : i + 1], Binding(only))
        torch.testing.assert_close(sparse[i], alone[0], atol=1e-5, rtol=1e-5)


def _multitask_run(permute_tasks: bool, **extra):
    from fedloom.runs.workspace import prepare_workspace
    from fedloom.runtime.config import FederationConfig
    from fedloom.runtime.simulation import InProcessRuntime
    from tests.conftest import SHARED_DATA, small_config

    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data bundle not found at {SHARED_DATA}")
    cfg = small_config(**{"dataset": "multitask", "data.data_dir": str(SHARED_DATA), "data.text.train_size": 12,
                          "data.text.val_size": 2, "data.text.test_size": 2, "data.num_clients": 3,
                          "prompt.max_tokens": 40, "router_hidden": 16,
                          "generation.max_new_tokens": "{gsm8k: 2, arc_challenge: 2, tweeteval: 2, jfleg: 2}",
                          **extra})  # fmt: skip
    ws = prepare_workspace(cfg)
    if permute_tasks:  # the hidden task labels: scramble them — the method must not notice
        for learner in ws.learners.values():
            learner.task.tasks[:] = np.random.default_rng(1).permutation(learner.task.tasks)
    from fedloom.algorithms.registry import build_algorithm

    algo = build_algorithm("fedweave", method_context(cfg, ws.lm.layout.slot()))
    return InProcessRuntime(algo, ws.learners, FederationConfig(eval_every=10), seed=0).run(ws.shared_init, 2)


def test_task_labels_are_never_read():
    a, b = _multitask_run(False), _multitask_run(True)
    assert a.server.tensors.keys() == b.server.tensors.keys()
    for key, value in a.server.tensors.items():
        assert torch.equal(value, b.server.tensors[key]), key
    assert a.server.scalars == b.server.scalars


@pytest.mark.parametrize("granularity", ["prototype/client", "client/client", "prototype/prototype"])
def test_two_rounds_on_the_tiny_model(granularity):
    result = _multitask_run(False, **{"methods.fedweave.granularity": granularity})
    assert all(not r.failures and not r.rejected for r in result.history)
    experts = int(result.server.scalars[EXPERTS])
    assert experts >= 1 and FC2_B in result.server.tensors and result.server.tensors[FC2_B].shape == (experts,)
    assert "buckets" in result.history[0].train[next(iter(result.history[0].train))]


def test_discovery_runs_on_every_client_whatever_the_sampling_fraction():
    from fedloom.runs.workspace import prepare_workspace
    from fedloom.runtime.simulation import InProcessRuntime
    from tests.conftest import small_config

    cfg = small_config(**{"method": "fedweave", "federation.fraction": 0.34, "router_hidden": 16, "rounds": 3})
    ws = prepare_workspace(cfg)
    algo = build_algorithm("fedweave", method_context(cfg, ws.lm.layout.slot()))
    hist = InProcessRuntime(algo, ws.learners, cfg.federation, seed=0).run(ws.shared_init, 3).history
    assert sorted(hist[0].selected) == sorted(ws.learners)  # stage 1: everyone
    assert all(len(r.selected) == 1 for r in hist[1:])  # stage 3: the runtime's sample
    assert not any(r.failures for r in hist)
