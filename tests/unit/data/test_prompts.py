"""Prompt template T(d, z): covariates serialized, budget kept, the most recent text kept."""

from __future__ import annotations

import pandas as pd
import pytest

from fedloom.backbone.loading import smollm2_tokenizer
from fedloom.data import PromptConfig, SampleTable, tokenize_prompts
from fedloom.data.prompts import serialize_covariates
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
