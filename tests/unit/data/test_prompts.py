"""Prompt template T(d, z): covariates serialized, budget kept, the most recent text kept; modality
variants; chat-formatted instructions."""

from __future__ import annotations

import pandas as pd
import pytest

from fedloom.backbone.loading import smollm2_tokenizer
from fedloom.data.prompts import (
    PromptConfig,
    chat_prompt,
    serialize_covariates,
    tokenize_instructions,
    tokenize_prompts,
    uses_numeric_side_channel,
)
from fedloom.data.schema import SampleTable, TextTable
from fedloom.errors import DataError


@pytest.fixture(scope="module")
def tokenizer():
    return smollm2_tokenizer()


def _table(text: str) -> SampleTable:
    frame = pd.DataFrame(
        {"date": [pd.Timestamp("2022-01-03")], "instrument": ["X"], "group": ["energy"], "text": [text],
         "mom5": [0.0123], "target": [0.01]}
    )  # fmt: skip
    return SampleTable(frame, ("mom5",), "t")


def test_serialize_covariates():
    assert serialize_covariates(["mom5", "vol20"], [0.0123, -0.5]) == "mom5=+0.0123, vol20=-0.5000"


def test_prompt_contains_text_and_covariates(tokenizer):
    ids = tokenize_prompts(_table("Basin Oil finds a major gas field."), tokenizer, PromptConfig())
    text = tokenizer.decode(ids.row(0))
    assert "Sector: energy. News: Basin Oil finds a major gas field." in text
    assert "mom5=+0.0123" in text and text.endswith("Next-day return:")


def test_long_text_is_cut_from_the_start(tokenizer):
    old = " ".join(f"old{i}" for i in range(200))
    ids = tokenize_prompts(_table(f"{old} LATEST HEADLINE."), tokenizer, PromptConfig(max_tokens=40))
    assert len(ids.row(0)) <= 40
    text = tokenizer.decode(ids.row(0))
    assert "LATEST HEADLINE." in text and "old0 " not in text and "mom5=+0.0123" in text


def test_budget_too_small_is_an_error(tokenizer):
    with pytest.raises(DataError, match="max_tokens=10 leaves no room for text in row 0"):
        tokenize_prompts(_table("x"), tokenizer, PromptConfig(max_tokens=10))


def test_nan_targets_are_rejected():
    frame = _table("x").frame.assign(target=[float("nan")])
    with pytest.raises(DataError, match="1 non-finite targets"):
        SampleTable(frame, ("mom5",), "t")


@pytest.mark.parametrize(
    ("inputs", "has_news", "has_data", "side_channel"),
    [("text", True, False, False), ("structured", False, True, False), ("text+numeric", True, False, True)],
)
def test_input_modality_variants(tokenizer, inputs, has_news, has_data, side_channel):
    """Seed 000, Table 13: text-only, structured-as-text, and text with a numeric side channel."""
    cfg = PromptConfig(inputs=inputs)
    text = tokenizer.decode(tokenize_prompts(_table("Oil jumps."), tokenizer, cfg).row(0))
    assert ("News: Oil jumps." in text) == has_news and ("mom5=+0.0123" in text) == has_data
    assert uses_numeric_side_channel(cfg) == side_channel and text.endswith("Next-day return:")


def test_empty_text_is_marked(tokenizer):
    text = tokenizer.decode(tokenize_prompts(_table(""), tokenizer, PromptConfig()).row(0))
    assert "News: (none)\nData: mom5=+0.0123" in text


def test_instructions_use_the_chat_template(tokenizer):
    frame = pd.DataFrame(
        {
            "id": ["a"],
            "task": ["tweeteval"],
            "split": ["test"],
            "prompt": ["Classify: great day"],
            "response": ["positive"],
            "references": [("positive",)],
            "label": ["positive"],
        }
    )
    prompts, responses = tokenize_instructions(TextTable(frame, "t"), tokenizer, max_tokens=512)
    assert chat_prompt(tokenizer, "Classify: great day") == tokenizer.decode(prompts.row(0))
    assert "<|im_start|>user\nClassify: great day<|im_end|>" in tokenizer.decode(prompts.row(0))
    assert tokenizer.decode(prompts.row(0)).endswith("<|im_start|>assistant\n")
    assert responses.row(0).tolist()[-1] == tokenizer.eos_token_id
    short, _ = tokenize_instructions(TextTable(frame, "t"), tokenizer, max_tokens=8)
    assert len(short.row(0)) == 8 and tokenizer.decode(short.row(0)).endswith("assistant\n")
