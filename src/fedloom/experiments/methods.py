"""The configured method, built for the party that holds it: a server (or the in-process runtime,
which holds both halves) may compute with the backbone and public text; a client never does."""

from __future__ import annotations

import torch

from fedloom.algorithms.base import Algorithm
from fedloom.algorithms.registry import BuildContext, build_algorithm
from fedloom.backbone.features import Ragged
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.model import AdaptedLM
from fedloom.data.instructions import public_corpus
from fedloom.experiments.config import RunConfig


def method_context(cfg: RunConfig, layout: TensorLayout | None = None, lm: AdaptedLM | None = None) -> BuildContext:
    """What the registry builds ``cfg.method`` from; ``layout`` orders the flat adapter vector, ``lm`` is
    given on the server only (with a loader of public text, read when a method asks for it)."""

    def public_text(size: int, max_tokens: int) -> Ragged:
        assert lm is not None
        text = public_corpus(cfg.data.data_dir, size, cfg.seed)
        ids = lm.backbone.tokenizer(text, truncation=True, max_length=max_tokens)["input_ids"]
        return Ragged.from_rows(ids, torch.int64)

    fed = cfg.federation
    return BuildContext(cfg.train, cfg.adapter.rank, cfg.adapter.alpha, cfg.rounds, cfg.seed, cfg.methods, layout,
                        cfg.privacy, cfg.robust, fed.fraction, fed.clients_per_round, lm,
                        None if lm is None else public_text)  # fmt: skip


def build_method(cfg: RunConfig, lm: AdaptedLM | None, *, server: bool) -> Algorithm:
    """``cfg.method`` on ``lm``'s adapter layout, as the server (``server=True``) or a client builds it;
    for a federated reference (no LM), ``references.algorithm`` on the network's tensors."""
    if cfg.is_reference:
        return build_algorithm(cfg.references.algorithm, method_context(cfg))
    assert lm is not None, f"{cfg.method} needs the backbone"
    return build_algorithm(cfg.method, method_context(cfg, lm.layout.slot(), lm if server else None))
