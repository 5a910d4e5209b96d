"""The frozen-prefix and frozen-embedding caches are exact (fp32, with padding), and the embedding
is computed only when read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedloom.backbone import features as features_module
from fedloom.backbone.features import Ragged, _load_prefix, cached_features, compute_features, frozen_embedding
from fedloom.backbone.lora import Binding

TEXTS = [
    "Nimbus Systems beats quarterly earnings estimates.",
    "Oil",
    "The central bank raises interest rates. Harbor Bancorp upgraded on strong demand, shares rally.",
    "No news for Curex.",
    "Analysts downgrade Pixelar to sell.",
]


def _tokens(backbone) -> Ragged:
    return Ragged.from_rows([backbone.tokenizer(t)["input_ids"] for t in TEXTS], torch.int64)


def _random_adapter(lm, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(v.shape, generator=g) * 0.2 for k, v in lm.layout.init_slot(g).items()}


def test_ragged_pad_right_pads_with_mask():
    r = Ragged.from_rows([[1, 2, 3], [4]], torch.int64)
    ids, mask = r.pad([1, 0], pad_value=0)
    assert ids.tolist() == [[4, 0, 0], [1, 2, 3]]
    assert mask.tolist() == [[1, 0, 0], [1, 1, 1]]


def test_cached_prefix_matches_the_full_forward_with_padding(tiny_lm):
    tokens = _tokens(tiny_lm.backbone)
    feats = compute_features(tiny_lm, tokens, batch_size=2)
    assert feats.prefix is not None and len(feats.prefix) == len(TEXTS)
    binding = Binding(_random_adapter(tiny_lm))
    rows = np.arange(len(TEXTS))
    prefix, mask = feats.prefix_batch(tiny_lm, rows)
    cached = tiny_lm.pooled_from_prefix(prefix, mask, binding)
    ids, mask_full = tokens.pad(rows, pad_value=tiny_lm.backbone.tokenizer.pad_token_id)
    full = tiny_lm.pooled(ids, mask_full, binding)
    assert (cached - full).abs().max().item() <= 1e-5
    for i in rows:  # each against its own unpadded forward
        one = tiny_lm.pooled(*tokens.pad([i]), binding)
        assert (cached[i] - one[0]).abs().max().item() <= 1e-5


def test_frozen_embedding_matches_an_adapter_free_forward(tiny_lm):
    tokens = _tokens(tiny_lm.backbone)
    feats = compute_features(tiny_lm, tokens, batch_size=3)
    ids, mask = tokens.pad(np.arange(len(TEXTS)), pad_value=0)
    assert (feats.embedding - tiny_lm.pooled(ids, mask, None)).abs().max().item() <= 1e-5


def _entries(cache: Path) -> list[Path]:
    """Cache entries, without their lock files (``.<entry>.lock``)."""
    return [p for p in cache.iterdir() if not p.name.startswith(".")]


def test_disk_cache_round_trip_is_exact_and_memory_mapped(tiny_lm, tmp_path):
    tokens = _tokens(tiny_lm.backbone)
    first = cached_features(tiny_lm, tokens, tmp_path)
    assert len(_entries(tmp_path)) == 1  # the prefix; the embedding is written when first read
    assert first.embedding.shape == (len(TEXTS), tiny_lm.hidden_size)
    assert len(_entries(tmp_path)) == 2
    second = cached_features(tiny_lm, tokens, tmp_path)
    assert isinstance(second.prefix.values, np.memmap)
    reference = compute_features(tiny_lm, tokens)
    np.testing.assert_array_equal(np.asarray(second.prefix.values), reference.prefix.values)
    torch.testing.assert_close(second.embedding, reference.embedding)
    assert np.array_equal(first.prefix.offsets, second.prefix.offsets)


def test_cache_key_changes_with_tokens(tiny_lm, tmp_path):
    tokens = _tokens(tiny_lm.backbone)
    cached_features(tiny_lm, tokens, tmp_path)
    other = Ragged.from_rows([tiny_lm.backbone.tokenizer("different")["input_ids"]], torch.int64)
    cached_features(tiny_lm, other, tmp_path)
    assert len(_entries(tmp_path)) == 2


def test_bfloat16_prefix_round_trips(tiny_backbone, tmp_path):
    from fedloom.backbone.lora import LoraSpec
    from fedloom.backbone.model import AdaptedLM

    tiny_backbone.model.to(torch.bfloat16)
    lm = AdaptedLM(tiny_backbone, LoraSpec(layers=(3,)))
    tokens = _tokens(tiny_backbone)
    loaded = cached_features(lm, tokens, tmp_path)
    reference = compute_features(lm, tokens)
    assert loaded.prefix.dtype == torch.bfloat16
    assert torch.equal(loaded.prefix.row(2), reference.prefix.row(2))


def test_heads_never_run_the_vocabulary_projection(tiny_lm):
    calls = []
    tiny_lm.model.lm_head.register_forward_hook(lambda *a: calls.append(1))
    tokens = _tokens(tiny_lm.backbone)
    feats = compute_features(tiny_lm, tokens)
    prefix, mask = feats.prefix_batch(tiny_lm, [0, 1])
    tiny_lm.pooled_from_prefix(prefix, mask, Binding(_random_adapter(tiny_lm)))
    assert calls == []


def test_token_ids_are_cached_by_key(tmp_path):
    from fedloom.backbone.features import cached_ragged

    calls = []

    def compute():
        calls.append(1)
        return Ragged.from_rows([[1, 2, 3], [4]], torch.int64)

    a = cached_ragged(tmp_path, "k1", compute)
    b = cached_ragged(tmp_path, "k1", compute)
    assert len(calls) == 1 and np.array_equal(a.values, b.values) and np.array_equal(a.offsets, b.offsets)
    cached_ragged(tmp_path, "k2", compute)
    assert len(calls) == 2
    assert cached_ragged(None, "k1", compute) is not None and len(calls) == 3


def _count_frozen_passes(monkeypatch, lm) -> list[str]:
    """Record every frozen pass: ``prefix`` (layers below L0 over token ids), ``embedding`` (pooled)."""
    calls: list[str] = []
    prefix, embedding = lm.prefix, features_module.frozen_embedding
    monkeypatch.setattr(lm, "prefix", lambda *a: calls.append("prefix") or prefix(*a))
    monkeypatch.setattr(features_module, "frozen_embedding", lambda *a: calls.append("embedding") or embedding(*a))
    return calls


def test_the_embedding_is_computed_once_and_only_when_read(tiny_lm, monkeypatch):
    tokens = _tokens(tiny_lm.backbone)
    calls = _count_frozen_passes(monkeypatch, tiny_lm)
    feats = compute_features(tiny_lm, tokens, batch_size=2)
    assert calls == ["prefix"] * 3  # 5 rows in batches of 2; no embedding yet
    first, second = feats.embedding, feats.embedding
    assert calls.count("embedding") == 1 and first is second
    assert "prefix" not in calls[3:]  # the embedding starts from the cached prefix states


def test_no_frozen_pass_when_every_layer_is_adapted(tiny_backbone, monkeypatch):
    from fedloom.backbone.lora import LoraSpec
    from fedloom.backbone.model import AdaptedLM

    lm = AdaptedLM(tiny_backbone, LoraSpec(rank=4, alpha=8, layers=None))
    calls = _count_frozen_passes(monkeypatch, lm)
    feats = compute_features(lm, _tokens(tiny_backbone))
    assert feats.prefix is None and calls == []


def test_the_embedding_from_cached_prefix_states_equals_the_one_from_token_ids(tiny_lm):
    """Exactly: starting from the cached states changes no bit of what the full frozen pass gives."""
    tokens = _tokens(tiny_lm.backbone)
    feats = compute_features(tiny_lm, tokens, batch_size=2)
    assert torch.equal(frozen_embedding(tiny_lm, tokens, feats.prefix, 2), frozen_embedding(tiny_lm, tokens, None, 2))


class _KilledError(Exception):
    """Stands for a session's end or Ctrl-C in the middle of a frozen-feature pass."""


def test_a_killed_prefix_pass_resumes_where_its_journal_says_and_ends_identical(tiny_lm, tmp_path):
    """Issue 43's CSI300 pass is hours on a CPU: it streams into a partial folder, records how many batches
    are on disk, and a rerun computes only the rest; the published folder equals the in-memory pass."""
    from fedloom.backbone.features import stream_prefix

    tokens = _tokens(tiny_lm.backbone)
    reference = compute_features(tiny_lm, tokens, batch_size=1).prefix
    folder = tmp_path / "entry"
    seen: list[int] = []

    def dies_after_three(n: int) -> None:
        seen.append(n)
        if len(seen) == 3:
            raise _KilledError

    with pytest.raises(_KilledError):
        stream_prefix(tiny_lm, tokens, folder, batch_size=1, progress=dies_after_three, checkpoint_rows=2)
    assert not folder.exists()  # nothing half-written is ever published
    journal = json.loads((tmp_path / ".entry.partial" / "journal.json").read_text())
    assert journal["batches_done"] == 2  # the third batch was computed but not yet recorded

    calls = []
    original = tiny_lm.prefix
    tiny_lm.prefix = lambda ids, mask: calls.append(len(ids)) or original(ids, mask)  # type: ignore[method-assign]
    try:
        stream_prefix(tiny_lm, tokens, folder, batch_size=1, checkpoint_rows=2)
    finally:
        tiny_lm.prefix = original  # type: ignore[method-assign]
    assert len(calls) == len(TEXTS) - 2  # only the batches the journal did not count
    assert not (tmp_path / ".entry.partial").exists()
    loaded = _load_prefix(folder)
    np.testing.assert_array_equal(np.asarray(loaded.values), reference.values)
    np.testing.assert_array_equal(loaded.offsets, reference.offsets)


def test_a_partial_pass_of_another_plan_starts_over(tiny_lm, tmp_path):
    from fedloom.backbone.features import stream_prefix

    tokens = _tokens(tiny_lm.backbone)
    folder = tmp_path / "entry"

    def dies(n: int) -> None:
        raise _KilledError

    with pytest.raises(_KilledError):
        stream_prefix(tiny_lm, tokens, folder, batch_size=1, progress=dies, checkpoint_rows=1)
    stream_prefix(tiny_lm, tokens, folder, batch_size=2)  # another batching: the journal's count means nothing
    np.testing.assert_array_equal(
        np.asarray(_load_prefix(folder).values), compute_features(tiny_lm, tokens, batch_size=2).prefix.values
    )
