"""FedBiOT: layer drop, emulator, alignment losses and the bi-level round on the tiny Llama."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedloom.algorithms.base import NUM_EXAMPLES, LocalContext, Record
from fedloom.algorithms.config import FedBiOTConfig
from fedloom.algorithms.fedbiot import ALIGN_LOSS, EMULATOR, FedBiOT
from fedloom.algorithms.registry import build_algorithm
from fedloom.backbone.emulator import Aligner, Emulator, distillation, gap_l2, kept_layers
from fedloom.backbone.features import Ragged
from fedloom.backbone.lora import LoraSpec
from fedloom.backbone.model import AdaptedLM
from fedloom.errors import ConfigError
from fedloom.runs.methods import method_context
from fedloom.runs.workspace import prepare_workspace
from fedloom.runtime.communication import bytes_by_group
from tests.conftest import small_config


def test_kept_layers_follow_federatedscope_drop_layer():
    assert kept_layers(10, 0.5) == (0, 2, 4, 6, 9)  # stride 9/4, int() floors
    assert kept_layers(28, 0.2) == tuple(int(i * 27 / 21) for i in range(22))
    assert kept_layers(28, 0.2)[-1] == 27 and len(kept_layers(28, 0.2)) == 22
    assert kept_layers(4, 0.0) == (0, 1, 2, 3)
    assert kept_layers(3, 0.8) == (0,)


def test_gap_l2_and_distillation_match_hand_and_torch():
    g = torch.Generator().manual_seed(0)
    t, s = torch.randn(2, 3, 5, generator=g), torch.randn(2, 3, 5, generator=g)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    by_hand = [((t[b, i] - s[b, i]) / t[b, i].pow(2).mean().sqrt()).pow(2).mean() for b, i in ((0, 0), (0, 1), (1, 0))]
    torch.testing.assert_close(gap_l2(t, s, mask), torch.stack(by_hand).mean())
    assert gap_l2(t, t, mask) == 0
    kl = [F.kl_div(F.log_softmax(s[b, i], -1), F.log_softmax(t[b, i], -1), log_target=True, reduction="sum")
          for b, i in ((0, 0), (0, 1), (1, 0))]  # fmt: skip
    torch.testing.assert_close(distillation(t, s, mask), torch.stack(kl).mean())


@pytest.fixture
def lm3(tiny_backbone) -> AdaptedLM:
    """Adapter on the top layer of four: the emulator stands in for layers 0..2."""
    return AdaptedLM(tiny_backbone, LoraSpec(rank=4, alpha=8, layers=(3,)))


def _public(lm: AdaptedLM, n: int = 6) -> Ragged:
    ids = lm.backbone.tokenizer([f"public sentence number {k} about prices and news" for k in range(n)])["input_ids"]
    return Ragged.from_rows(ids, torch.int64)


def test_emulator_without_drop_or_lora_is_the_full_prefix_and_drops_layers_otherwise(lm3):
    public = _public(lm3)
    ids, mask = public.pad(np.arange(len(public)))
    full = lm3.prefix(ids, mask)
    exact = Emulator(lm3, drop_ratio=0.0)
    assert exact.layers == (0, 1, 2)
    torch.testing.assert_close(exact.prefix(ids, mask, exact.init(torch.Generator().manual_seed(0))), full)


def test_emulator_drops_layers_and_clients_never_run_them(lm3):
    emulator = Emulator(lm3, drop_ratio=0.5)
    assert emulator.layers == (0, 2)
    calls = []
    hook = lm3.model.model.layers[1].register_forward_hook(lambda *a: calls.append(1))
    public = _public(lm3)
    ids, mask = public.pad(np.arange(len(public)))
    try:
        out = emulator.prefix(ids, mask, emulator.init(torch.Generator().manual_seed(0)))
    finally:
        hook.remove()
    assert not calls and out.shape == lm3.prefix(ids, mask).shape
    assert not torch.allclose(out, lm3.prefix(ids, mask))
    assert all(".layers.0." in k or ".layers.2." in k for k in emulator.layout.keys)


def test_alignment_pulls_the_emulator_toward_the_full_model(lm3):
    emulator = Emulator(lm3, drop_ratio=0.5)
    aligner = Aligner(emulator, _public(lm3), batch_size=3, lr=0.05, kd_weight=0.0)
    lora = emulator.init(torch.Generator().manual_seed(0))
    before = {k: v.clone() for k, v in lora.items()}
    _, first = aligner(lora, {}, 1, torch.Generator().manual_seed(1))
    aligned, _ = aligner(lora, {}, 40, torch.Generator().manual_seed(1))
    _, after = aligner(aligned, {}, 1, torch.Generator().manual_seed(1))
    assert after < 0.9 * first
    assert all(torch.equal(lora[k], before[k]) for k in lora)  # the input state is not modified


def test_distillation_term_trains_through_the_adapter(lm3):
    emulator = Emulator(lm3, drop_ratio=0.5)
    lora = emulator.init(torch.Generator().manual_seed(0))
    adapter = lm3.layout.init_slot(torch.Generator().manual_seed(2))
    plain = Aligner(emulator, _public(lm3), 3, 0.05, kd_weight=0.0)(lora, adapter, 1, torch.Generator().manual_seed(3))
    kd = Aligner(emulator, _public(lm3), 3, 0.05, kd_weight=1.0)(lora, adapter, 1, torch.Generator().manual_seed(3))
    assert kd[1] > plain[1]  # the KL term is positive between a layer-dropped and the full model
    assert any(not torch.equal(kd[0][k], plain[0][k]) for k in lora)


@pytest.fixture(scope="module")
def workspace():
    return prepare_workspace(small_config(method="fedbiot", **{"adapter.layers": 1}))


def _algorithm(ws, steps=2, **options):
    sets = {"adapter.layers": 1, "train.steps": steps, **{f"methods.fedbiot.{k}": v for k, v in options.items()}}
    cfg = small_config(method="fedbiot", **sets)
    return build_algorithm("fedbiot", method_context(cfg, ws.lm.layout.slot(), ws.lm))


def test_round_downloads_emulator_uploads_adapter_and_aligns(workspace):
    algorithm = _algorithm(workspace, drop_ratio=0.5, align_steps=3, align_lr=0.05)
    clients = list(workspace.learners)
    server = algorithm.init_server(workspace.shared_init, clients)
    emulator_keys = {k for k in server.tensors if k.startswith(EMULATOR)}
    assert emulator_keys and all(".layers.0." in k or ".layers.2." in k for k in emulator_keys)
    assert server.scalars[ALIGN_LOSS] > 0
    downloads = algorithm.configure(server, clients, 1)
    uploads = {}
    for c in clients:
        state = algorithm.init_client(workspace.shared_init, workspace.learners[c], torch.Generator().manual_seed(0))
        ctx = LocalContext(workspace.learners[c], 1, torch.Generator().manual_seed(1))
        uploads[c] = algorithm.local_update(downloads[c], state, ctx).upload
        assert set(uploads[c].tensors) == set(workspace.shared_init)
        assert set(algorithm.upload_spec(downloads[c], c).tensors.keys) == set(workspace.shared_init)
    new = algorithm.aggregate(server, uploads, 1)
    n = {c: u.scalars[NUM_EXAMPLES] for c, u in uploads.items()}
    for key in workspace.shared_init:
        mean = sum(n[c] * uploads[c].tensors[key] for c in uploads) / sum(n.values())
        torch.testing.assert_close(new.tensors[key], mean)
    assert any(not torch.equal(new.tensors[k], server.tensors[k]) for k in emulator_keys)
    assert algorithm.diagnostics(server, uploads, new)[ALIGN_LOSS] == new.scalars[ALIGN_LOSS] > 0
    down = bytes_by_group(downloads[clients[0]], torch.bfloat16)
    assert down["emulator"] == 2 * sum(server.tensors[k].numel() for k in emulator_keys)  # counted, as its own group


def test_clients_train_on_the_emulator_not_the_cached_prefix(workspace):
    """The same download trains differently through a different emulator: the cache is not read."""
    algorithm = _algorithm(workspace, drop_ratio=0.5, pre_align_steps=0)
    server = algorithm.init_server(workspace.shared_init, list(workspace.learners))
    cid = next(iter(workspace.learners))
    learner = workspace.learners[cid]
    shifted = {k: (v + 0.5 if k.startswith(EMULATOR) and ".lora_B." in k else v) for k, v in server.tensors.items()}

    def upload(tensors):
        state = algorithm.init_client(workspace.shared_init, learner, torch.Generator().manual_seed(0))
        ctx = LocalContext(learner, 1, torch.Generator().manual_seed(1))
        return algorithm.local_update(Record(tensors), state, ctx).upload.tensors

    a, b = upload(server.tensors), upload(shifted)
    assert any(not torch.allclose(a[k], b[k]) for k in a)


def test_prox_acts_on_live_parameters(workspace):
    """A strong pull keeps the upload near the download (the released code's detached term would not)."""
    cid = next(iter(workspace.learners))
    learner = workspace.learners[cid]

    def drift(prox):
        algorithm = _algorithm(workspace, steps=12, prox=prox, pre_align_steps=0)
        server = algorithm.init_server(workspace.shared_init, [cid])
        state = algorithm.init_client(workspace.shared_init, learner, torch.Generator().manual_seed(0))
        up = algorithm.local_update(server, state, LocalContext(learner, 1, torch.Generator().manual_seed(1))).upload
        return sum((up.tensors[k] - server.tensors[k]).norm() ** 2 for k in up.tensors) ** 0.5

    assert drift(1e4) < 0.3 * drift(0.0)


def test_server_needs_backbone_and_public_text(workspace):
    client_side = build_algorithm(
        "fedbiot", method_context(small_config(method="fedbiot"), workspace.lm.layout.slot())
    )
    assert isinstance(client_side, FedBiOT) and client_side.aligner is None
    with pytest.raises(ConfigError, match="build it with the backbone"):
        client_side.init_server(workspace.shared_init, ["a"])
    assert FedBiOTConfig().drop_ratio == 0.2 and FedBiOTConfig().kd_weight == 0.0  # paper config dp2, kd 0
