"""Text-task metrics of seed 002 (section 4): ROUGE for editing, exact final answers, choice accuracy.

Generations are parsed leniently, since a model rarely answers with the bare label:

* GSM8K: the number after the last ``####``, else the last number in the text (commas dropped).
* multiple choice: the first standalone capital letter A–H (``"The answer is (B)."`` → ``B``).
* labels (TweetEval): the first listed label word that appears (``"Positive!"`` → ``positive``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

ROUGE_TYPES = ("rouge1", "rouge2", "rougeLsum")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_LETTER = re.compile(r"\b([A-H])\b")


def rouge_f1(
    predictions: Sequence[str], references: Sequence[Sequence[str]], use_stemmer: bool = False
) -> dict[str, float]:
    """Mean ROUGE-1 / ROUGE-2 / ROUGE-Lsum F1 over examples (``rouge-score``), each the best over the
    example's references, plus ``rouge_mean`` — their average, the number seed 002 reports for CoEdIT."""
    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"need one reference list per prediction, got {len(predictions)} and {len(references)}")
    from rouge_score import rouge_scorer  # nltk and scipy.stats behind it: ~0.8 s, only for text tasks

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for pred, refs in zip(predictions, references, strict=True):
        scores = scorer.score_multi(list(refs), pred)
        for kind in ROUGE_TYPES:
            totals[kind] += scores[kind].fmeasure
    out = {kind: totals[kind] / len(predictions) for kind in ROUGE_TYPES}
    out["rouge_mean"] = float(np.mean([out[k] for k in ROUGE_TYPES]))
    return out


def final_number(text: str) -> str | None:
    """``'... so 1,200 apples. #### 1200'`` → ``'1200'``; None when the text has no number."""
    tail = text.rsplit("####", 1)[1] if "####" in text else text
    numbers = _NUMBER.findall(tail) or _NUMBER.findall(text)
    return numbers[-1].replace(",", "") if numbers else None


def exact_match_score(generations: Sequence[str], labels: Sequence[str]) -> float:
    """Share of generations whose final number equals the label numerically (GSM8K)."""
    hits = [_same_number(final_number(g), label) for g, label in zip(generations, labels, strict=True)]
    return float(np.mean(hits)) if hits else float("nan")


def choice_letter(text: str) -> str | None:
    """The first standalone letter A–H in a generation, or None."""
    match = _LETTER.search(text)
    return match.group(1) if match else None


def choice_accuracy_score(generations: Sequence[str], labels: Sequence[str]) -> float:
    """Share of generations whose chosen letter equals the label (ARC-Challenge)."""
    hits = [choice_letter(g) == label for g, label in zip(generations, labels, strict=True)]
    return float(np.mean(hits)) if hits else float("nan")


def label_accuracy_score(generations: Sequence[str], labels: Sequence[str], vocabulary: Sequence[str]) -> float:
    """Share of generations whose first label word (from ``vocabulary``) equals the label (TweetEval)."""
    hits = [_first_label(g, vocabulary) == label for g, label in zip(generations, labels, strict=True)]
    return float(np.mean(hits)) if hits else float("nan")


def _first_label(text: str, vocabulary: Sequence[str]) -> str | None:
    lower = text.lower()
    found = [(m.start(), word) for word in vocabulary if (m := re.search(rf"\b{re.escape(word)}\b", lower))]
    return min(found)[1] if found else None


def _same_number(predicted: str | None, label: str) -> bool:
    if predicted is None:
        return False
    try:
        return abs(float(predicted) - float(label.replace(",", ""))) < 1e-6
    except ValueError:
        return predicted.strip() == label.strip()
