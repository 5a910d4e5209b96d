"""Prompt template T(d, z) of seed 000, eq. 1: news text plus serialized structured covariates.

The prompt is ``header | text | covariates | question``. When it exceeds the token budget, the text
is cut from its start, keeping the most recent text; header, covariates and question always stay.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from fedloom.backbone.features import Ragged
from fedloom.data.schema import SampleTable
from fedloom.errors import DataError


class PromptConfig(BaseModel):
    """How a sample becomes a prompt."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(96, ge=8, description="token budget per prompt; the oldest text is cut first")
    question: str = Field("Next-day return:", description="closing line of every prompt")


def serialize_covariates(names: Sequence[str], values: Sequence[float]) -> str:
    """``mom5=+0.0123, vol20=+0.0180``: structured covariates as text (4 decimals, signed)."""
    return ", ".join(f"{n}={v:+.4f}" for n, v in zip(names, values, strict=True))


def tokenize_prompts(table: SampleTable, tokenizer: object, cfg: PromptConfig) -> Ragged:
    """Token ids of every row's prompt (computed once per dataset; the ids key every later cache)."""
    frame = table.frame
    covariates = frame[list(table.covariates)].to_numpy(dtype=float)
    rows = []
    for i, (group, text) in enumerate(zip(frame["group"], frame["text"], strict=True)):
        head = _ids(tokenizer, f"Sector: {group}. News: ")
        body = _ids(tokenizer, str(text))
        tail = _ids(tokenizer, f"\nData: {serialize_covariates(table.covariates, covariates[i])}\n{cfg.question}")
        budget = cfg.max_tokens - len(head) - len(tail)
        if budget < 1:
            raise DataError(
                f"prompt.max_tokens={cfg.max_tokens} leaves no room for text in row {i} of {table.name!r} "
                f"(header and covariates take {len(head) + len(tail)} tokens)"
            )
        rows.append(head + body[-budget:] + tail)
    return Ragged.from_rows(rows, torch.int64)


def _ids(tokenizer: object, text: str) -> list[int]:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]  # type: ignore[operator]
    return [int(t) for t in np.asarray(ids).tolist()]
