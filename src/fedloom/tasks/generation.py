"""Instruction tuning with the frozen LM head (seed 002, §4): teacher-forced loss on the response
tokens for training, greedy decoding for the task metrics.

Sequence = chat-formatted prompt ids + response ids (+ EOS). The logits at positions P−1 … P+R−2
predict the R response tokens; only those positions pay for the vocabulary projection. There is
no private head: everything trainable is adapter (and router) tensors.

Metrics per task (the task column of the `TextTable`): GSM8K final-answer exact match, ARC-C
choice accuracy, TweetEval label accuracy, ROUGE-1/2/Lsum F1 for the editing tasks (JFLEG /
CoEdIT, reported as their mean ``rouge``), and the teacher-forced loss ``loss`` of every task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from fedloom.data.instructions import DEFAULT_NEW_TOKENS
from fedloom.data.schema import TextTable
from fedloom.metrics.text import choice_accuracy_score, exact_match_score, label_accuracy_score, rouge_f1

SENTIMENT = ("negative", "neutral", "positive")


@dataclass(frozen=True)
class GenerationTask:
    """Per-row task names, labels and references (for metrics) and the prompt length of each row."""

    tasks: np.ndarray
    labels: np.ndarray
    references: Sequence[tuple[str, ...]]
    prompt_lengths: np.ndarray
    max_new_tokens: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_NEW_TOKENS))
    primary_metric: ClassVar[str] = "score"

    @classmethod
    def of(
        cls,
        table: TextTable,
        prompt_lengths: np.ndarray | None = None,
        max_new_tokens: Mapping[str, int] | None = None,
    ) -> GenerationTask:
        """The task of ``table``'s rows; without ``prompt_lengths`` (scoring only: `evaluate_text`) none is known."""
        f = table.frame
        lengths = np.zeros(len(f), dtype=np.int64) if prompt_lengths is None else prompt_lengths
        budgets = dict(DEFAULT_NEW_TOKENS if max_new_tokens is None else max_new_tokens)
        return cls(f["task"].to_numpy(str), f["label"].to_numpy(str), list(f["references"]), lengths, budgets)

    def init_head(self, hidden_size: int, generator: torch.Generator) -> dict[str, Tensor]:
        return {}

    def response_positions(self, rows: np.ndarray, lengths: np.ndarray) -> list[tuple[int, int]]:
        """(first, last+1) positions whose logits predict each row's response tokens."""
        prompts = self.prompt_lengths[rows]
        return [(int(p) - 1, int(n) - 1) for p, n in zip(prompts, lengths, strict=True)]

    def loss(self, logits: Sequence[Tensor], targets: Sequence[Tensor]) -> Tensor:
        """Mean cross-entropy over every response token of the batch."""
        return F.cross_entropy(torch.cat(list(logits)), torch.cat(list(targets)))

    def row_losses(self, logits: Sequence[Tensor], targets: Sequence[Tensor]) -> np.ndarray:
        return np.array([float(F.cross_entropy(lg, t)) for lg, t in zip(logits, targets, strict=True)])

    def evaluate_text(self, generations: Sequence[str], rows: np.ndarray, losses: np.ndarray) -> dict[str, float]:
        """``{task}/score``, ``{task}/loss`` and their macro means ``score`` and ``loss`` over tasks."""
        out: dict[str, float] = {}
        frame = pd.DataFrame({"task": self.tasks[rows], "gen": list(generations), "loss": losses, "row": rows})
        for task, g in frame.groupby("task", sort=True):
            labels = list(self.labels[g["row"]])
            if task == "gsm8k":
                score = exact_match_score(list(g["gen"]), labels)
            elif task == "arc_challenge":
                score = choice_accuracy_score(list(g["gen"]), labels)
            elif task == "tweeteval":
                score = label_accuracy_score(list(g["gen"]), labels, SENTIMENT)
            else:
                rouge = rouge_f1(list(g["gen"]), [self.references[r] for r in g["row"]])
                score = float(np.mean([rouge[k] for k in sorted(rouge)]))
            out[f"{task}/score"] = score
            out[f"{task}/loss"] = float(g["loss"].mean())
        out["score"] = float(np.mean([v for k, v in out.items() if k.endswith("/score")]))
        out["loss"] = float(np.mean([v for k, v in out.items() if k.endswith("/loss")]))
        return out
