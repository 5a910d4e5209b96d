"""Prompts: template T(d, z) of seed 000, eq. 1, and chat-formatted instructions for text tasks.

A financial prompt is ``header | text | covariates | question``. When it exceeds the token budget,
the text is cut from its start, keeping the most recent text; header, covariates and question
always stay. ``inputs`` selects the input-modality variant of seed 000, Table 13:

| inputs                | text in prompt | covariates in prompt | covariates to the head         |
|-----------------------|----------------|----------------------|--------------------------------|
| ``text+structured``   | yes            | serialized           | no                             |
| ``text``              | yes            | no                   | no                             |
| ``structured``        | no             | serialized           | no                             |
| ``text+numeric``      | yes            | no                   | yes (numeric side channel)     |

The side channel itself belongs to the task head; `uses_numeric_side_channel` is the switch it reads,
and the covariates stay in the table for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.schema import SampleTable, TextTable
from fedloom.errors import DataError

if TYPE_CHECKING:  # the config above is read without torch; tokenizing imports it
    from transformers import PreTrainedTokenizerBase

    from fedloom.backbone.features import Ragged

NO_TEXT = "(none)"


class PromptConfig(BaseModel):
    """How a sample becomes a prompt."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(96, ge=8, description="token budget per prompt; the oldest text is cut first")
    question: str = Field("Next-day return:", description="closing line of every prompt")
    inputs: Literal["text+structured", "text", "structured", "text+numeric"] = Field(
        "text+structured", description="input modalities (seed 000 Table 13)"
    )
    decimals: int = Field(4, ge=0, le=8, description="decimals of serialized covariates")


def uses_numeric_side_channel(cfg: PromptConfig) -> bool:
    """Whether the head receives the covariates as numbers (``text+numeric``)."""
    return cfg.inputs == "text+numeric"


def serialize_covariates(names: Sequence[str], values: Sequence[float], decimals: int = 4) -> str:
    """``mom5=+0.0123, vol20=+0.0180``: structured covariates as text (signed, fixed decimals)."""
    return ", ".join(f"{n}={v:+.{decimals}f}" for n, v in zip(names, values, strict=True))


def tokenize_prompts(table: SampleTable, tokenizer: PreTrainedTokenizerBase, cfg: PromptConfig) -> Ragged:
    """Token ids of every row's prompt (computed once per dataset; the ids key every later cache)."""
    frame = table.frame
    with_text = cfg.inputs != "structured"
    with_covariates = cfg.inputs in ("text+structured", "structured") and bool(table.covariates)
    covariates = frame[list(table.covariates)].to_numpy(dtype=float)
    rows = []
    for i, (group, text) in enumerate(zip(frame["group"], frame["text"], strict=True)):
        head = _ids(tokenizer, f"Sector: {group}. News: " if with_text else f"Sector: {group}.")
        body = _ids(tokenizer, str(text) or NO_TEXT) if with_text else []
        data = (
            f"\nData: {serialize_covariates(table.covariates, covariates[i], cfg.decimals)}" if with_covariates else ""
        )
        tail = _ids(tokenizer, f"{data}\n{cfg.question}")
        budget = cfg.max_tokens - len(head) - len(tail)
        if budget < (1 if with_text else 0):
            raise DataError(
                f"prompt.max_tokens={cfg.max_tokens} leaves no room for text in row {i} of {table.name!r} "
                f"(header and covariates take {len(head) + len(tail)} tokens)"
            )
        rows.append(head + (body[-budget:] if budget else []) + tail)
    return _ragged_ids(rows)


def chat_prompt(tokenizer: PreTrainedTokenizerBase, user: str) -> str:
    """``user`` as one user turn in the backbone's chat template, ending where the assistant starts."""
    messages = [{"role": "user", "content": user}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return cast(str, text)  # tokenize=False gives the text (typed as every return form)


def tokenize_instructions(
    table: TextTable, tokenizer: PreTrainedTokenizerBase, max_tokens: int
) -> tuple[Ragged, Ragged]:
    """(prompt ids, response ids) per row: the prompt chat-formatted, the response followed by EOS.

    A prompt over ``max_tokens`` keeps its last ``max_tokens`` ids (the question's end and the
    assistant header); a response keeps its first ``max_tokens`` ids.
    """
    eos = getattr(tokenizer, "eos_token_id", None)
    prompts, responses = [], []
    for prompt, response in zip(table.frame["prompt"], table.frame["response"], strict=True):
        prompts.append(_ids(tokenizer, chat_prompt(tokenizer, prompt))[-max_tokens:])
        responses.append((_ids(tokenizer, response) + ([eos] if eos is not None else []))[:max_tokens])
    return _ragged_ids(prompts), _ragged_ids(responses)


def _ragged_ids(rows: Sequence[Sequence[int]]) -> Ragged:
    """Token-id rows stored end to end (torch is imported here, not by the config above)."""
    import torch

    from fedloom.backbone.features import Ragged

    return Ragged.from_rows(rows, torch.int64)


def _ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return [int(t) for t in np.asarray(ids).tolist()]
