"""Instruction tasks of the FedWeave benchmark (seed 002, section 4) as `TextTable`s.

GSM8K, ARC-Challenge, TweetEval sentiment and a text-editing task (JFLEG here, CoEdIT where its
files exist), with disjoint per-task train / val / test subsets drawn by a seeded permutation (the
paper: 2000 / 100 / 400 per task; CPU default 200 / 25 / 50). Subsets respect the official splits:

| task          | train from            | val from                 | test from                  |
|---------------|-----------------------|--------------------------|----------------------------|
| gsm8k         | train.jsonl           | train.jsonl (disjoint)   | test.jsonl                 |
| arc_challenge | train.jsonl           | dev.jsonl                | test.jsonl                 |
| tweeteval     | test.jsonl (part A)   | val.jsonl                | test.jsonl (part B)        |
| jfleg         | dev.jsonl             | dev.jsonl (disjoint)     | test.jsonl                 |
| coedit        | train.jsonl           | validation.jsonl         | validation.jsonl (disjoint)|

TweetEval has no train split in the bundle and JFLEG none at all, so they train on part of an
evaluation split; every table built that way says so in its ``notes``. A request larger than a
source uses all of it (also noted).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.files import DATA_PATH, dataset_dir
from fedloom.data.reading import read_jsonl
from fedloom.data.schema import TEXT_COLUMNS, TextTable
from fedloom.errors import DataError

SENTIMENT = ("negative", "neutral", "positive")
DEFAULT_NEW_TOKENS = {"gsm8k": 192, "arc_challenge": 4, "tweeteval": 4, "jfleg": 64, "coedit": 64}  # seed 002 budgets
LETTERS = "ABCDEFGH"
_CALCULATOR = re.compile(r"<<[^>]*>>")


class TextTasksConfig(BaseModel):
    """Per-task subset sizes and sources of the instruction tasks."""

    model_config = ConfigDict(extra="forbid")

    train_size: int = Field(200, ge=1, description="training examples per task (paper: 2000)")
    val_size: int = Field(25, ge=1, description="validation examples per task (paper: 100)")
    test_size: int = Field(50, ge=1, description="test examples per task (paper: 400)")
    seed: int = Field(0, description="seed of the subset draws (the paper redraws per run seed)")
    edit_task: Literal["jfleg", "coedit"] = Field("jfleg", description="text-editing task of the multitask mix")
    coedit_folder: Annotated[str, DATA_PATH] = Field(
        "coedit", description="folder with CoEdIT's train.jsonl / validation.jsonl"
    )


class _Draw:
    """Disjoint seeded draws from named sources; remembers which requests were cut short."""

    def __init__(self, task: str, seed: int) -> None:
        self.rng = np.random.default_rng([seed, sum(map(ord, task))])
        self.task = task
        self.taken: dict[str, tuple[np.ndarray, int]] = {}
        self.notes: list[str] = []

    def __call__(self, name: str, frame: pd.DataFrame, n: int, split: str) -> pd.DataFrame:
        """``n`` rows of source ``name`` not drawn before, with ``split`` and ``id`` = task-source-row."""
        if name not in self.taken:
            self.taken[name] = (self.rng.permutation(len(frame)), 0)
        order, used = self.taken[name]
        picked = np.sort(order[used : used + n])
        self.taken[name] = (order, used + len(picked))
        if len(picked) < n:
            self.notes.append(f"{self.task}: asked for {n} {split} examples, {name} had {len(picked)} left")
        ids = [f"{self.task}-{name.removesuffix('.jsonl')}-{k}" for k in picked]
        return frame.iloc[picked].assign(split=split, id=ids, task=self.task)


def _read(path: Path) -> pd.DataFrame:
    return read_jsonl(path, dtype=False)


def _table(parts: list[pd.DataFrame], name: str, notes: list[str]) -> TextTable:
    frame = pd.concat(parts, ignore_index=True)
    frame["references"] = frame["references"].map(tuple)
    if "source" not in frame.columns:  # only the editing tasks rewrite an input text
        frame["source"] = ""
    return TextTable(frame[[*TEXT_COLUMNS, "source"]], name, tuple(notes))


def gsm8k_answer(solution: str) -> str:
    """The final answer after ``####``, commas removed: ``'... #### 1,200'`` → ``'1200'``."""
    if "####" not in solution:
        raise DataError(f"GSM8K answer has no '####' final-answer marker: {solution[-80:]!r}")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def load_gsm8k(data_dir: Path | str | None, cfg: TextTasksConfig) -> TextTable:
    """GSM8K: word problem → worked solution ending in ``#### <number>``; label = the number."""
    folder = dataset_dir(data_dir, "gsm8k", ("train.jsonl", "test.jsonl"))
    train, test, draw = _read(folder / "train.jsonl"), _read(folder / "test.jsonl"), _Draw("gsm8k", cfg.seed)
    parts = [
        draw("train.jsonl", train, cfg.train_size, "train"),
        draw("train.jsonl", train, cfg.val_size, "val"),
        draw("test.jsonl", test, cfg.test_size, "test"),
    ]
    for p in parts:
        p["prompt"] = "Solve the math word problem. End with '#### ' and the final number.\n\n" + p["question"]
        p["response"] = p["answer"].map(lambda a: _CALCULATOR.sub("", a))
        p["label"] = p["answer"].map(gsm8k_answer)
        p["references"] = p["response"].map(lambda r: (r,))
    return _table(parts, "gsm8k", draw.notes)


def arc_prompt(question: dict) -> tuple[str, list[str]]:
    """Question stem with choices relabelled A, B, C, … by position, and the original labels."""
    choices = question["choices"]
    lines = [f"{LETTERS[k]}. {c['text']}" for k, c in enumerate(choices)]
    text = (
        "Answer the science question with the letter of the correct choice.\n\n"
        + question["stem"]
        + "\n"
        + "\n".join(lines)
    )
    return text, [str(c["label"]) for c in choices]


def load_arc(data_dir: Path | str | None, cfg: TextTasksConfig) -> TextTable:
    """ARC-Challenge: question + lettered choices → the letter (keys ``1``–``4`` mapped by position)."""
    files = ("train.jsonl", "dev.jsonl", "test.jsonl")
    folder = dataset_dir(data_dir, "arc_challenge", files)
    draw = _Draw("arc_challenge", cfg.seed)
    sizes = {"train": cfg.train_size, "val": cfg.val_size, "test": cfg.test_size}
    sources = {f: _read(folder / f).rename(columns={"id": "ai2_id"}) for f in files}
    parts = [draw(f, sources[f], sizes[s], s) for f, s in zip(files, ("train", "val", "test"), strict=True)]
    for p in parts:
        prompts, letters = [], []
        for qid, question, key in zip(p["ai2_id"], p["question"], p["answerKey"], strict=True):
            text, labels = arc_prompt(question)
            if str(key) not in labels:
                raise DataError(f"arc_challenge {qid}: answerKey {key!r} is not among the choice labels {labels}")
            prompts.append(text)
            letters.append(LETTERS[labels.index(str(key))])
        p["prompt"], p["response"], p["label"] = prompts, letters, letters
        p["references"] = p["label"].map(lambda r: (r,))
    return _table(parts, "arc_challenge", draw.notes)


def load_tweeteval(data_dir: Path | str | None, cfg: TextTasksConfig) -> TextTable:
    """TweetEval sentiment: tweet → negative / neutral / positive. Trains on part of the official test split."""
    folder = dataset_dir(data_dir, "tweeteval_sentiment", ("val.jsonl", "test.jsonl"))
    val, test, draw = _read(folder / "val.jsonl"), _read(folder / "test.jsonl"), _Draw("tweeteval", cfg.seed)
    parts = [
        draw("test.jsonl", test, cfg.train_size, "train"),
        draw("val.jsonl", val, cfg.val_size, "val"),
        draw("test.jsonl", test, cfg.test_size, "test"),
    ]
    for p in parts:
        p["prompt"] = "Classify the sentiment of the tweet as negative, neutral or positive.\n\nTweet: " + p["text"]
        p["label"] = p["label"].map(lambda k: SENTIMENT[int(k)])
        p["response"] = p["label"]
        p["references"] = p["label"].map(lambda r: (r,))
    note = "tweeteval: no train split in the bundle; train and test are disjoint parts of the official test split"
    return _table(parts, "tweeteval", [note, *draw.notes])


def _edit_rows(p: pd.DataFrame, prompt: pd.Series, refs: pd.Series, source: pd.Series) -> pd.DataFrame:
    p["prompt"], p["label"], p["source"] = prompt, "", source.astype(str)
    p["references"] = refs.map(lambda r: tuple(str(x) for x in r))
    p["response"] = p["references"].map(lambda r: r[0])
    return p


def load_jfleg(data_dir: Path | str | None, cfg: TextTasksConfig) -> TextTable:
    """JFLEG (stand-in for CoEdIT): sentence → fluent correction; references = its 4 human corrections."""
    folder = dataset_dir(data_dir, "jfleg", ("dev.jsonl", "test.jsonl"))
    dev, test, draw = _read(folder / "dev.jsonl"), _read(folder / "test.jsonl"), _Draw("jfleg", cfg.seed)
    parts = [
        draw("dev.jsonl", dev, cfg.train_size, "train"),
        draw("dev.jsonl", dev, cfg.val_size, "val"),
        draw("test.jsonl", test, cfg.test_size, "test"),
    ]
    parts = [_edit_rows(p, "Fix grammatical errors in this sentence: " + p["src"], p["refs"], p["src"]) for p in parts]
    note = "jfleg: no train split exists; train and val are disjoint parts of dev, test is the official test"
    return _table(parts, "jfleg", [note, *draw.notes])


def load_coedit(data_dir: Path | str | None, cfg: TextTasksConfig) -> TextTable:
    """CoEdIT (``{"_id", "task", "src", "tgt"}`` lines; ``src`` already holds the edit instruction)."""
    folder = dataset_dir(data_dir, cfg.coedit_folder, ("train.jsonl", "validation.jsonl"))
    train, valid, draw = _read(folder / "train.jsonl"), _read(folder / "validation.jsonl"), _Draw("coedit", cfg.seed)
    for name, frame in (("train.jsonl", train), ("validation.jsonl", valid)):
        missing = [c for c in ("_id", "task", "src", "tgt") if c not in frame.columns]
        if missing:
            raise DataError(f"{folder / name}: missing keys {missing}; CoEdIT lines are {{_id, task, src, tgt}}")
    parts = [
        draw("train.jsonl", train, cfg.train_size, "train"),
        draw("validation.jsonl", valid, cfg.val_size, "val"),
        draw("validation.jsonl", valid, cfg.test_size, "test"),
    ]
    # the text after the instruction ("Fix grammar: <text>") is what an unchanged copy would return
    sources = [p["src"].str.split(": ", n=1).str[-1] for p in parts]
    parts = [_edit_rows(p, p["src"], p["tgt"].map(lambda t: (t,)), s) for p, s in zip(parts, sources, strict=True)]
    return _table(parts, "coedit", draw.notes)


def load_multitask(data_dir: Path | str | None, cfg: TextTasksConfig) -> TextTable:
    """The four-task mix: edit task (JFLEG or CoEdIT), GSM8K, TweetEval and ARC-Challenge."""
    edit = load_jfleg if cfg.edit_task == "jfleg" else load_coedit
    tables = [edit(data_dir, cfg), load_gsm8k(data_dir, cfg), load_tweeteval(data_dir, cfg), load_arc(data_dir, cfg)]
    frame = pd.concat([t.frame for t in tables], ignore_index=True)
    return TextTable(frame, "multitask", tuple(n for t in tables for n in t.notes))


def public_corpus(data_dir: Path | str | None, size: int, seed: int) -> list[str]:
    """Public instruction text a server may hold (FedBiOT aligns its emulator on such text, Alpaca in
    the paper): ``size`` GSM8K training problems with their solutions, drawn with ``seed``."""
    folder = dataset_dir(data_dir, "gsm8k", ("train.jsonl",))
    train = _read(folder / "train.jsonl")
    picked = np.sort(np.random.default_rng(seed).permutation(len(train))[:size])
    return [
        f"{q}\n{_CALCULATOR.sub('', a)}"
        for q, a in zip(train["question"].iloc[picked], train["answer"].iloc[picked], strict=True)
    ]
