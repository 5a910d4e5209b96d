"""FedLEASE: the 2M−1 router always keeps the client's own expert, clustering, cluster-level
aggregation by hand, and the warm-up → clustered-MoE run on the tiny model."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.algorithms.base import NUM_EXAMPLES, Record
from fedloom.algorithms.config import FedLEASEConfig, LocalTrainingConfig
from fedloom.algorithms.fedlease import CLUSTER, CLUSTERS, ROUTER, STAGE, FedLEASE, expert_weights
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.lora import lora_a_key, lora_b_key


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 5), seed=st.integers(0, 9999), own=st.integers(0, 4))
def test_own_expert_is_always_selected(m, seed, own):
    own = own % m
    logits = torch.randn(7, 2 * m - 1, generator=torch.Generator().manual_seed(seed)) * 3
    w = expert_weights(logits, m, own)
    torch.testing.assert_close(w.sum(1), torch.ones(7))
    assert torch.all(w[:, own] > 0) and torch.all(w >= 0)


P0 = "model.layers.0.self_attn.q_proj"
LAYOUT = TensorLayout(((lora_a_key(P0), (2, 3)), (lora_b_key(P0), (4, 2))))


def test_clustering_groups_clients_by_b_similarity_and_starts_experts_at_cluster_means():
    algo = FedLEASE(LocalTrainingConfig(), FedLEASEConfig(warmup_rounds=1, max_clusters=3), 0, LAYOUT)
    g = torch.Generator().manual_seed(0)
    centres = [torch.randn(4, 2, generator=g), torch.randn(4, 2, generator=g)]
    uploads = {}
    for i in range(6):  # clients 0-2 near centre 0, 3-5 near centre 1
        b = centres[i // 3] + 0.05 * torch.randn(4, 2, generator=g)
        uploads[f"c{i}"] = Record({lora_a_key(P0): torch.full((2, 3), float(i)), lora_b_key(P0): b},
                                  {NUM_EXAMPLES: 10, "embedding_dim": 8})  # fmt: skip
    server = algo.aggregate(algo.init_server({}, list(uploads)), uploads, 1)
    assert server.scalars[CLUSTERS] == 2
    groups = [server.scalars[f"{CLUSTER}/c{i}"] for i in range(6)]
    assert groups[0] == groups[1] == groups[2] != groups[3] == groups[4] == groups[5]
    g0 = groups[0]
    assert server.tensors[lora_a_key(P0, f"e{g0}")][0, 0].item() == pytest.approx(1.0)  # mean of 0, 1, 2
    assert server.tensors[f"{ROUTER}/{g0}"].shape == (3, 8)  # 2M − 1 outputs


def test_cluster_level_aggregation_by_hand():
    algo = FedLEASE(LocalTrainingConfig(), FedLEASEConfig(), 0, LAYOUT)

    def e(m, v):
        return {lora_a_key(P0, f"e{m}"): torch.full((2, 3), v), lora_b_key(P0, f"e{m}"): torch.full((4, 2), v)}

    routers = {f"{ROUTER}/0": torch.zeros(3, 2), f"{ROUTER}/1": torch.zeros(3, 2)}
    clusters = {f"{CLUSTER}/a": 0, f"{CLUSTER}/b": 0, f"{CLUSTER}/c": 1}
    server = Record({**e(0, 0.0), **e(1, 9.0), **routers}, {STAGE: "moe", CLUSTERS: 2, "largest": 0, **clusters})
    ups = {
        "a": Record({**e(0, 1.0), ROUTER: torch.ones(3, 2)}, {NUM_EXAMPLES: 10}),
        "b": Record({**e(0, 3.0), ROUTER: torch.full((3, 2), 3.0)}, {NUM_EXAMPLES: 90}),
    }
    new = algo.aggregate(server, ups, 7)
    assert new.tensors[lora_a_key(P0, "e0")][0, 0].item() == 2.0  # uniform over the cluster, as the code
    assert new.tensors[f"{ROUTER}/0"][0, 0].item() == 2.0
    assert new.tensors[lora_a_key(P0, "e1")][0, 0].item() == 9.0  # cluster 1 sent nothing this round
    down = algo.configure(new, ["c"], 8)["c"]
    assert down.scalars[CLUSTER] == 1 and ROUTER in down.tensors


def test_warmup_then_clustered_rounds_on_the_tiny_model():
    from fedloom.runs.workspace import prepare_workspace
    from fedloom.runtime.config import FederationConfig
    from fedloom.runtime.simulation import InProcessRuntime
    from tests.conftest import small_config

    cfg = small_config(**{"data.synthetic.sectors": 4})
    ws = prepare_workspace(cfg)
    algo = FedLEASE(cfg.train, FedLEASEConfig(warmup_rounds=1, max_clusters=2), 0, ws.lm.layout.slot())
    hist = InProcessRuntime(algo, ws.learners, FederationConfig(), 0).run(ws.shared_init, 3).history
    assert all(not r.failures and not r.rejected for r in hist)
    per_client = ws.lm.layout.slot().numel * 2 + 8 + 8  # bf16 LoRA + num_examples + embedding_dim
    assert all(v == per_client for v in hist[0].upload_bytes.values())  # round 1: the warm-up LoRA
    assert all(v > 0 for v in hist[-1].upload_bytes.values()) and "personal/test/ic/macro" in hist[-1].summary
