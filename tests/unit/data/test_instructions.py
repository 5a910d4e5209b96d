"""Instruction tasks: subset sizes, disjoint draws, labels per task, CoEdIT's format, and the four-task mix."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedloom.data.instructions import (
    TextTasksConfig,
    arc_prompt,
    gsm8k_answer,
    load_arc,
    load_coedit,
    load_gsm8k,
    load_jfleg,
    load_multitask,
    load_tweeteval,
)
from fedloom.errors import DataError
from tests.conftest import SHARED_DATA

shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")
FIXTURES = Path(__file__).parent / "fixtures"  # holds coedit/: a hand-written FIXTURE in CoEdIT's format
SMALL = TextTasksConfig(train_size=30, val_size=5, test_size=10)


def _disjoint(frame: pd.DataFrame) -> None:
    assert frame["id"].is_unique
    assert set(frame["split"]) == {"train", "val", "test"}


@shared
def test_gsm8k_final_answer_labels():
    t = load_gsm8k(SHARED_DATA, SMALL)
    assert t.frame.groupby("split").size().to_dict() == {"test": 10, "train": 30, "val": 5}
    _disjoint(t.frame)
    assert all(
        r.endswith(f"#### {label}") or r.replace(",", "").endswith(label)
        for r, label in zip(t.frame["response"], t.frame["label"], strict=True)
    )
    assert not t.frame["response"].str.contains("<<").any()  # calculator annotations removed
    assert t.frame.loc[t.frame["split"] == "test", "id"].str.startswith("gsm8k-test-").all()
    assert gsm8k_answer("so 1,200 apples\n#### 1,200") == "1200"


@shared
def test_arc_letters_map_numeric_keys_by_position():
    t = load_arc(SHARED_DATA, TextTasksConfig(train_size=1119, val_size=299, test_size=1172))
    assert set(t.frame["label"]) <= set("ABCDE") and len(t) == 1119 + 299 + 1172
    text, labels = arc_prompt({"stem": "Q?", "choices": [{"text": "x", "label": "1"}, {"text": "y", "label": "2"}]})
    assert text.endswith("Q?\nA. x\nB. y") and labels == ["1", "2"]
    raw = pd.read_json(SHARED_DATA / "arc_challenge" / "train.jsonl", lines=True, dtype=False)
    numeric = raw[raw["answerKey"].astype(str).str.isdigit()].iloc[0]
    row = t.frame[t.frame["id"] == f"arc_challenge-train-{numeric.name}"].iloc[0]
    assert row["label"] == "ABCDE"[int(numeric["answerKey"]) - 1]


@shared
def test_tweeteval_trains_on_part_of_test_and_says_so():
    t = load_tweeteval(SHARED_DATA, SMALL)
    _disjoint(t.frame)
    assert set(t.frame["label"]) <= {"negative", "neutral", "positive"}
    source = t.frame["id"].str.split("-").str[1]
    assert (source[t.frame["split"] != "val"] == "test").all() and (source[t.frame["split"] == "val"] == "val").all()
    assert any("no train split" in n for n in t.notes)
    assert (t.frame["source"] == "").all()  # only the editing tasks rewrite an input


@shared
def test_jfleg_has_four_references_and_caps_requests():
    t = load_jfleg(SHARED_DATA, TextTasksConfig(train_size=750, val_size=10, test_size=5))
    assert (t.frame["references"].map(len) == 4).all() and (t.frame["label"] == "").all()
    # the sentence to correct, unchanged: what the trivial predictor returns (the prompt ends with it)
    assert all(p.endswith(": " + s) and s for p, s in zip(t.frame["prompt"], t.frame["source"], strict=True))
    assert (t.frame["split"] == "val").sum() == 4  # dev has 754 rows: 750 train leave 4
    assert any("asked for 10 val examples" in n for n in t.notes) and any("no train split" in n for n in t.notes)


def test_coedit_loader_on_the_fixture():
    t = load_coedit(FIXTURES, TextTasksConfig(train_size=4, val_size=2, test_size=2))
    _disjoint(t.frame)
    row = t.frame.iloc[0]
    assert row["task"] == "coedit" and row["prompt"].split(":")[0] in {
        "Fix grammar",
        "Paraphrase this",
        "Simplify this sentence",
        "Make this clearer",
        "Remove POV",
        "Fix coherence",
    }
    assert row["references"] == (row["response"],)
    assert row["prompt"].endswith(": " + row["source"]) and ":" not in row["source"][:1]  # the instruction cut off


def test_coedit_format_errors_name_the_file(tmp_path):
    (tmp_path / "coedit").mkdir()
    (tmp_path / "coedit" / "train.jsonl").write_text('{"id": 1, "source": "x", "target": "y"}\n')
    (tmp_path / "coedit" / "validation.jsonl").write_text('{"_id": 1, "task": "gec", "src": "x", "tgt": "y"}\n')
    with pytest.raises(DataError, match=r"coedit/train.jsonl: missing keys \['_id', 'task', 'src', 'tgt'\]"):
        load_coedit(tmp_path, SMALL)


@shared
def test_multitask_mixes_four_tasks_with_equal_budgets():
    t = load_multitask(SHARED_DATA, SMALL)
    assert t.tasks == ("arc_challenge", "gsm8k", "jfleg", "tweeteval")
    assert (t.frame.groupby(["task", "split"]).size().unstack()["train"] == 30).all()
    again = load_multitask(SHARED_DATA, SMALL)
    pd.testing.assert_frame_equal(t.frame, again.frame)  # seeded draws
    other = load_multitask(SHARED_DATA, SMALL.model_copy(update={"seed": 1}))
    assert set(other.frame["id"]) != set(t.frame["id"])
