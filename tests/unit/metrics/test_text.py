"""Text metrics: ROUGE against an independent n-gram count, answer parsing, exact match and accuracy."""

from __future__ import annotations

from collections import Counter

import pytest

from fedloom.metrics.text import (
    choice_accuracy_score,
    choice_letter,
    exact_match_score,
    final_number,
    label_accuracy_score,
    rouge_f1,
)


def _ngram_f1(pred: str, ref: str, n: int) -> float:
    """ROUGE-N F1 written out: clipped n-gram overlap of lower-cased alphanumeric tokens."""

    def grams(text: str) -> Counter:
        toks = "".join(c if c.isalnum() else " " for c in text.lower()).split()
        return Counter(tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))

    p, r = grams(pred), grams(ref)
    overlap = sum((p & r).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(p.values()), overlap / sum(r.values())
    return 2 * precision * recall / (precision + recall)


def test_rouge_against_independent_counts():
    pred, ref = "the cat sat on the mat", "the cat is on the mat today"
    got = rouge_f1([pred], [[ref]])
    assert got["rouge1"] == pytest.approx(_ngram_f1(pred, ref, 1))
    assert got["rouge2"] == pytest.approx(_ngram_f1(pred, ref, 2))
    # LCS "the cat on the mat" = 5 tokens: P = 5/6, R = 5/7
    assert got["rougeLsum"] == pytest.approx(2 * (5 / 6) * (5 / 7) / (5 / 6 + 5 / 7))
    assert got["rouge_mean"] == pytest.approx((got["rouge1"] + got["rouge2"] + got["rougeLsum"]) / 3)


def test_rouge_takes_the_best_reference_and_averages_examples():
    got = rouge_f1(["a b c", "x y"], [["q r s", "a b c"], ["x z"]])
    assert got["rouge1"] == pytest.approx((1.0 + 0.5) / 2)
    with pytest.raises(ValueError, match="one reference list per prediction"):
        rouge_f1(["a"], [])


@pytest.mark.parametrize(
    ("text", "number"),
    [("3 + 4 = 7\n#### 7", "7"), ("It costs $1,200 in total.", "1200"), ("-3.5 degrees", "-3.5"), ("no idea", None)],
)
def test_final_number(text, number):
    assert final_number(text) == number


def test_exact_match_and_choices_and_labels():
    assert exact_match_score(["#### 72", "so 72.0", "#### 71", "none"], ["72", "72", "72", "72"]) == 0.5
    assert choice_letter("The answer is (B).") == "B" and choice_letter("I think so") is None
    assert choice_accuracy_score(["B", "Answer: C", "A"], ["B", "C", "D"]) == pytest.approx(2 / 3)
    vocab = ("negative", "neutral", "positive")
    assert label_accuracy_score(
        ["Positive!", "neutral, not negative", "mixed"], ["positive", "neutral", "negative"], vocab
    ) == pytest.approx(2 / 3)
