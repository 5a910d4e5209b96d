"""Frozen per-sample features, computed once and reused across steps, rounds, clients and methods.

* token ids of every prompt;
* the prefix: hidden states entering the lowest adapted layer ``L0`` (they depend only on frozen
  weights), stored ragged (no padding) in memory or in a memory-mapped file for large sets;
* the frozen embedding: the mean-pooled final hidden state with no adapters, used by routers and
  prototype discovery; computed (and cached) only when a method first reads it.

Rows are right-padded when batched. With a causal mask the real positions never attend to padding,
so cached and full forwards agree to float rounding.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from fedloom.backbone.cache_lock import build_once
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
    """Token ids, cached prefix states (None when ``L0 = 0``) and the frozen embedding, on demand.

    ``source`` replaces the frozen layers below ``L0``: it maps padded token ids and mask to the
    hidden states entering ``L0`` (FedBiOT's clients run a compressed emulator there, not the model).
    ``pooled`` computes (or loads) the frozen embedding the first time it is read, so a run whose
    method never reads it (FedAvg on all layers) never pays for the pass.
    """

    tokens: Ragged
    prefix: Ragged | None
    pooled: Callable[[], Tensor]
    source: Callable[[Tensor, Tensor], Tensor] | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def embedding(self) -> Tensor:
        """The frozen embedding [N, H] (routers and prototype discovery read it), computed on first use."""
        return self.pooled()

    def prefix_batch(self, lm: AdaptedLM, indices: Sequence[int] | np.ndarray) -> tuple[Tensor, Tensor]:
        """Hidden states entering ``L0`` for a batch, with mask: from ``source``, the cache, or the model."""
        if self.source is None and self.prefix is not None:
            return self.prefix.pad(indices)
        ids, mask = self.tokens.pad(indices, pad_value=lm.pad_id)
        return (lm.prefix if self.source is None else self.source)(ids, mask), mask


def _batches(tokens: Ragged, batch_size: int) -> Iterator[np.ndarray]:
    """Row indices in length-sorted batches (to limit padding); every frozen pass walks them alike."""
    order = np.argsort(tokens.lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def _prefix_rows(
    lm: AdaptedLM, tokens: Ragged, batches: Sequence[np.ndarray], progress: Callable[[int], None] | None
) -> Iterator[tuple[int, Tensor]]:
    """(row, its frozen prefix states [length, H]) of every row of ``batches``, batch by batch."""
    with torch.no_grad():
        for idx in batches:
            ids, mask = tokens.pad(idx, pad_value=lm.pad_id)
            stored = lm.prefix(ids, mask).cpu()
            for b, i in enumerate(idx):
                yield int(i), stored[b, : int(mask[b].sum())]
            if progress is not None:
                progress(len(idx))


def compute_prefix(
    lm: AdaptedLM, tokens: Ragged, batch_size: int = 16, progress: Callable[[int], None] | None = None
) -> Ragged | None:
    """Run the frozen layers below ``L0`` once over every sample, in memory; None (and no pass) when ``L0 = 0``."""
    if lm.start_layer == 0:
        return None
    rows = {i: r.clone() for i, r in _prefix_rows(lm, tokens, list(_batches(tokens, batch_size)), progress)}
    return Ragged.from_rows([rows[i] for i in range(len(tokens))], lm.backbone.dtype)


PARTIAL_CHECKPOINT_ROWS = 512  # a resumable pass records its progress after about this many rows


def stream_prefix(
    lm: AdaptedLM,
    tokens: Ragged,
    folder: Path,
    batch_size: int = 16,
    progress: Callable[[int], None] | None = None,
    checkpoint_rows: int = PARTIAL_CHECKPOINT_ROWS,
) -> None:
    """`compute_prefix` written straight into ``folder`` (prefix.npy memory-mapped, offsets.npy, meta.json),
    so memory stays one batch whatever the set's size (CSI300 at issue 43's size is ~18 GB of float32 states
    on a 24 GB machine), and resumable: the pass works in ``.<folder>.partial`` beside it, records after
    every ``checkpoint_rows`` rows how many length-sorted batches are on disk, and a pass killed midway
    (a session's end, Ctrl-C) continues from there; the finished folder is published by one rename. The
    caller holds the entry's lock (`build_once`), so one process writes a partial folder at a time."""
    if lm.start_layer == 0:
        _publish(folder, {}, {"prefix_dtype": None})
        return
    partial = folder.with_name(f".{folder.name}.partial")
    dtype = str(lm.backbone.dtype).removeprefix("torch.")
    plan = {"rows": len(tokens), "batch_size": batch_size, "prefix_dtype": dtype, "hidden": lm.hidden_size}
    journal = partial / "journal.json"
    done = 0
    if journal.is_file() and (partial / "prefix.npy").is_file():
        state = json.loads(journal.read_text())
        done = int(state["batches_done"]) if state.get("plan") == plan else 0
    if done == 0:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        storage = np.int16 if lm.backbone.dtype == torch.bfloat16 else np.dtype(dtype)
        np.lib.format.open_memmap(partial / "prefix.npy", "w+", storage, (int(tokens.offsets[-1]), lm.hidden_size))
        _write_journal(journal, plan, 0)
    values = np.load(partial / "prefix.npy", mmap_mode="r+")
    batches = list(_batches(tokens, batch_size))
    if progress is not None and done:
        progress(int(sum(len(b) for b in batches[:done])))  # what the earlier pass left on disk
    since = 0
    for k, idx in enumerate(batches[done:], start=done):
        for i, states in _prefix_rows(lm, tokens, [idx], progress):
            values[tokens.offsets[i] : tokens.offsets[i + 1]] = _to_numpy(states)
        since += len(idx)
        if since >= checkpoint_rows or k == len(batches) - 1:
            values.flush()  # the states before the journal that counts them
            _write_journal(journal, plan, k + 1)
            since = 0
    del values
    np.save(partial / "offsets.npy", tokens.offsets)
    (partial / "meta.json").write_text(json.dumps({"prefix_dtype": dtype}))
    journal.unlink()
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def _write_journal(path: Path, plan: dict[str, object], batches_done: int) -> None:
    staging = path.with_suffix(".tmp")
    staging.write_text(json.dumps({"plan": plan, "batches_done": batches_done}))
    staging.replace(path)  # atomic: a kill leaves the old count or the new one


def frozen_embedding(lm: AdaptedLM, tokens: Ragged, prefix: Ragged | None, batch_size: int = 16) -> Tensor:
    """The mean-pooled final hidden state with no adapters [N, H], starting from the cached prefix
    states when there are any (the layers below ``L0`` are not run again)."""
    embedding = torch.zeros(len(tokens), lm.hidden_size)
    with torch.no_grad():
        for idx in _batches(tokens, batch_size):
            if prefix is not None:
                hidden, mask = prefix.pad(idx)
            else:
                ids, mask = tokens.pad(idx, pad_value=lm.pad_id)
                hidden = lm.prefix(ids, mask)
            embedding[torch.as_tensor(idx)] = lm.pooled_from_prefix(hidden, mask, None)
    return embedding


def compute_features(
    lm: AdaptedLM, tokens: Ragged, batch_size: int = 16, progress: Callable[[int], None] | None = None
) -> FrozenFeatures:
    """The prefix states now; the frozen embedding when first read."""
    prefix = compute_prefix(lm, tokens, batch_size, progress)
    return FrozenFeatures(tokens, prefix, functools.cache(lambda: frozen_embedding(lm, tokens, prefix, batch_size)))


def cached_features(
    lm: AdaptedLM,
    tokens: Ragged,
    cache_dir: Path | None,
    batch_size: int = 16,
    progress: Callable[[int], None] | None = None,
) -> FrozenFeatures:
    """`compute_features`, memoized on disk under ``cache_dir`` (memory-mapped on load); the frozen
    embedding gets its own entry, written the first time a run reads it.

    The key covers the model identity, ``L0`` and every token id, so a stale entry can never be read.
    """
    if cache_dir is None:
        return compute_features(lm, tokens, batch_size, progress)
    digest = hashlib.sha256()
    digest.update(f"{lm.backbone.identity}|L0={lm.start_layer}".encode())
    digest.update(np.ascontiguousarray(tokens.values).tobytes())
    digest.update(tokens.offsets.tobytes())
    folder = cache_dir / digest.hexdigest()[:24]

    def build_prefix() -> Ragged | None:
        stream_prefix(lm, tokens, folder, batch_size, progress)
        return _load_prefix(folder)

    prefix = build_once(folder, (folder / "meta.json").is_file, lambda: _load_prefix(folder), build_prefix)
    embedding_dir = folder.with_name(f"{folder.name}-embedding")
    embedding_file = embedding_dir / "embedding.npy"

    def build_embedding() -> None:
        _publish(embedding_dir, {"embedding.npy": frozen_embedding(lm, tokens, prefix, batch_size).numpy()})

    def pooled() -> Tensor:
        build_once(embedding_dir, embedding_file.is_file, lambda: None, build_embedding)
        return torch.from_numpy(np.load(embedding_file))

    return FrozenFeatures(tokens, prefix, functools.cache(pooled))


def cached_ragged(cache_dir: Path | None, key: str, compute: Callable[[], Ragged]) -> Ragged:
    """``compute()`` memoized on disk under ``cache_dir/key`` (token ids: tokenize once per dataset)."""
    if cache_dir is None:
        return compute()
    folder = cache_dir / hashlib.sha256(key.encode()).hexdigest()[:24]

    def build() -> Ragged:
        ragged = compute()
        _publish(folder, {"values.npy": ragged.values, "offsets.npy": ragged.offsets})
        return ragged

    return build_once(
        folder,
        (folder / "offsets.npy").is_file,
        lambda: Ragged(np.load(folder / "values.npy"), np.load(folder / "offsets.npy"), torch.int64),
        build,
    )


def _publish(folder: Path, arrays: dict[str, np.ndarray], meta: dict[str, str | None] | None = None) -> None:
    """Write ``arrays`` (and ``meta.json``) into ``folder`` atomically: a reader sees all or nothing."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    try:
        for name, array in arrays.items():
            np.save(staging / name, array)
        if meta is not None:
            (staging / "meta.json").write_text(json.dumps(meta))
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)  # atomic publish
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _load_prefix(folder: Path) -> Ragged | None:
    meta = json.loads((folder / "meta.json").read_text())
    if meta["prefix_dtype"] is None:
        return None
    return Ragged(
        np.load(folder / "prefix.npy", mmap_mode="r"),
        np.load(folder / "offsets.npy"),
        getattr(torch, meta["prefix_dtype"]),
    )


def _to_numpy(t: Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy()
    return t.numpy()


def _to_torch(a: np.ndarray, dtype: torch.dtype) -> Tensor:
    t = torch.from_numpy(np.array(a))  # copy: memory-mapped pages stay read-only
    return t.view(torch.bfloat16) if dtype == torch.bfloat16 else t
