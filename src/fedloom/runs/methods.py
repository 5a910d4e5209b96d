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
from fedloom.runs.config import RunConfig
from fedloom.runs.kinds import kind_of


def method_context(cfg: RunConfig, layout: TensorLayout | None = None, lm: AdaptedLM | None = None) -> BuildContext:
    """What the registry builds ``cfg.method`` from; ``layout`` orders the flat adapter vector, ``lm`` is
    given on the server only (with a loader of public text, read when a method asks for it)."""

    def public_text(size: int, max_tokens: int) -> Ragged:
        assert lm is not None
        text = public_corpus(cfg.data.data_dir, size, cfg.seed)
        ids = lm.backbone.tokenizer(text, truncation=True, max_length=max_tokens)["input_ids"]
        return Ragged.from_rows(ids, torch.int64)

    fed = cfg.federation
    return BuildContext(
        local=cfg.train,
        rank=cfg.adapter.rank,
        alpha=cfg.adapter.alpha,
        rounds=cfg.rounds,
        seed=cfg.seed,
        options=cfg.methods,
        layout=layout,
        privacy=cfg.privacy,
        robust=cfg.robust,
        fraction=fed.fraction,
        clients_per_round=fed.clients_per_round,
        lm=lm,
        public=None if lm is None else public_text,
    )


def build_method(cfg: RunConfig, lm: AdaptedLM | None, *, server: bool) -> Algorithm:
    """The run's federated algorithm (`fedloom.runs.kinds`: ``cfg.method``, or a federated reference's
    ``references.algorithm``), as the server (``server=True``) or a client builds it: on ``lm``'s adapter
    layout, or on a reference network's tensors (no LM)."""
    kind = kind_of(cfg)
    assert kind.algorithm is not None, f"{cfg.method} is fitted in one pass: it has no federated algorithm"
    if not kind.backbone:
        return build_algorithm(kind.algorithm(cfg), method_context(cfg))
    assert lm is not None, f"{cfg.method} needs the backbone"
    return build_algorithm(kind.algorithm(cfg), method_context(cfg, lm.layout.slot(), lm if server else None))
