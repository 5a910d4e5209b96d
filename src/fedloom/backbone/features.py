"""Frozen per-sample features, computed once and reused across steps, rounds, clients and methods.

* token ids of every prompt;
* the prefix: hidden states entering the lowest adapted layer ``L0`` (they depend only on frozen
  weights), stored ragged (no padding) in memory or in a memory-mapped file for large sets;
* the frozen embedding: the mean-pooled final hidden state with no adapters, used by routers and
  prototype discovery.

Rows are right-padded when batched. With a causal mask the real positions never attend to padding,
so cached and full forwards agree to float rounding.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from fedloom.backbone.model import AdaptedLM


@dataclass(frozen=True)
class Ragged:
    """Variable-length rows stored end to end: row ``i`` is ``values[offsets[i]:offsets[i+1]]``.

    ``values`` is a NumPy array (possibly memory-mapped); bfloat16 rows are stored as int16 bits.
    """

    values: np.ndarray
    offsets: np.ndarray
    dtype: torch.dtype

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[int]] | Sequence[Tensor], dtype: torch.dtype) -> Ragged:
        lengths = [len(r) for r in rows]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if dtype == torch.int64:
            values = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(offsets[-1]))
        else:
            values = _to_numpy(torch.cat([torch.as_tensor(r) for r in rows]).to(dtype))
        return cls(values, offsets, dtype)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def row(self, i: int) -> Tensor:
        return _to_torch(self.values[self.offsets[i] : self.offsets[i + 1]], self.dtype)

    def pad(self, indices: Sequence[int] | np.ndarray, pad_value: float = 0) -> tuple[Tensor, Tensor]:
        """Right-padded batch ``[B, T_max, ...]`` and its 0/1 mask ``[B, T_max]``."""
        idx = np.asarray(indices, dtype=np.int64)
        lengths = self.lengths[idx]
        t_max = int(lengths.max()) if len(idx) else 0
        shape = (len(idx), t_max, *self.values.shape[1:])
        out = torch.full(shape, pad_value, dtype=self.dtype)
        mask = torch.zeros(len(idx), t_max, dtype=torch.long)
        for b, (i, n) in enumerate(zip(idx, lengths, strict=True)):
            out[b, :n] = self.row(int(i))
            mask[b, :n] = 1
        return out, mask


@dataclass(frozen=True)
class FrozenFeatures:
    """Token ids, cached prefix states (None when ``L0 = 0``) and optional frozen embeddings [N, H].

    ``source`` replaces the frozen layers below ``L0``: it maps padded token ids and mask to the
    hidden states entering ``L0`` (FedBiOT's clients run a compressed emulator there, not the model).
    """

    tokens: Ragged
    prefix: Ragged | None
    embedding: Tensor | None
    source: Callable[[Tensor, Tensor], Tensor] | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    def prefix_batch(self, lm: AdaptedLM, indices: Sequence[int] | np.ndarray) -> tuple[Tensor, Tensor]:
        """Hidden states entering ``L0`` for a batch, with mask: from ``source``, the cache, or the model."""
        if self.source is None and self.prefix is not None:
            return self.prefix.pad(indices)
        ids, mask = self.tokens.pad(indices, pad_value=lm.pad_id)
        return (lm.prefix if self.source is None else self.source)(ids, mask), mask


def compute_features(
    lm: AdaptedLM,
    tokens: Ragged,
    with_embedding: bool = False,
    batch_size: int = 16,
    progress: Callable[[int], None] | None = None,
) -> FrozenFeatures:
    """Run the frozen layers once over every sample (length-sorted batches to limit padding)."""
    need_prefix = lm.start_layer > 0
    order = np.argsort(tokens.lengths, kind="stable")
    prefix_rows: dict[int, Tensor] = {}  # row → its frozen prefix states
    embedding = torch.zeros(len(tokens), lm.hidden_size) if with_embedding else None
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            ids, mask = tokens.pad(idx, pad_value=lm.pad_id)
            hidden = lm.prefix(ids, mask)
            if need_prefix:
                stored = hidden.cpu()
                for b, i in enumerate(idx):
                    prefix_rows[int(i)] = stored[b, : int(mask[b].sum())].clone()
            if embedding is not None:
                embedding[torch.as_tensor(idx)] = lm.pooled_from_prefix(hidden, mask, None)
            if progress is not None:
                progress(len(idx))
    prefix = Ragged.from_rows([prefix_rows[i] for i in range(len(tokens))], lm.backbone.dtype) if need_prefix else None
    return FrozenFeatures(tokens, prefix, embedding)


def cached_features(
    lm: AdaptedLM,
    tokens: Ragged,
    cache_dir: Path | None,
    with_embedding: bool = False,
    batch_size: int = 16,
    progress: Callable[[int], None] | None = None,
) -> FrozenFeatures:
    """`compute_features`, memoized on disk under ``cache_dir`` (memory-mapped on load).

    The key covers the model identity, ``L0``, every token id and whether embeddings are included,
    so a stale entry can never be read.
    """
    if cache_dir is None:
        return compute_features(lm, tokens, with_embedding, batch_size, progress)
    digest = hashlib.sha256()
    digest.update(f"{lm.backbone.identity}|L0={lm.start_layer}|emb={with_embedding}".encode())
    digest.update(np.ascontiguousarray(tokens.values).tobytes())
    digest.update(tokens.offsets.tobytes())
    folder = cache_dir / digest.hexdigest()[:24]
    if (folder / "meta.json").is_file():
        return _load(folder, tokens)
    features = compute_features(lm, tokens, with_embedding, batch_size, progress)
    _save(folder, features)
    return _load(folder, tokens)


def cached_ragged(cache_dir: Path | None, key: str, compute: Callable[[], Ragged]) -> Ragged:
    """``compute()`` memoized on disk under ``cache_dir/key`` (token ids: tokenize once per dataset)."""
    if cache_dir is None:
        return compute()
    folder = cache_dir / hashlib.sha256(key.encode()).hexdigest()[:24]
    if (folder / "offsets.npy").is_file():
        return Ragged(np.load(folder / "values.npy"), np.load(folder / "offsets.npy"), torch.int64)
    ragged = compute()
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    try:
        np.save(staging / "values.npy", ragged.values)
        np.save(staging / "offsets.npy", ragged.offsets)  # written last: its presence marks completeness
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ragged


def _save(folder: Path, features: FrozenFeatures) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    try:
        meta: dict[str, str | bool | None] = {"prefix_dtype": None, "embedding": features.embedding is not None}
        if features.prefix is not None:
            np.save(staging / "prefix.npy", features.prefix.values)
            np.save(staging / "offsets.npy", features.prefix.offsets)
            meta["prefix_dtype"] = str(features.prefix.dtype).removeprefix("torch.")
        if features.embedding is not None:
            np.save(staging / "embedding.npy", features.embedding.numpy())
        (staging / "meta.json").write_text(json.dumps(meta))
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)  # atomic publish
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _load(folder: Path, tokens: Ragged) -> FrozenFeatures:
    meta = json.loads((folder / "meta.json").read_text())
    prefix = None
    if meta["prefix_dtype"] is not None:
        prefix = Ragged(
            np.load(folder / "prefix.npy", mmap_mode="r"),
            np.load(folder / "offsets.npy"),
            getattr(torch, meta["prefix_dtype"]),
        )
    embedding = torch.from_numpy(np.load(folder / "embedding.npy")) if meta["embedding"] else None
    return FrozenFeatures(tokens, prefix, embedding)


def _to_numpy(t: Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy()
    return t.numpy()


def _to_torch(a: np.ndarray, dtype: torch.dtype) -> Tensor:
    t = torch.from_numpy(np.array(a))  # copy: memory-mapped pages stay read-only
    return t.view(torch.bfloat16) if dtype == torch.bfloat16 else t
