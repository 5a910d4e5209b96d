"""The trivial predictor beside every financial run: each client's training mean (or majority class),
scored on the same rows, and its training loss (½ on standardized targets)."""

from __future__ import annotations

import numpy as np
import pytest

from fedloom.runs.baseline import constant_baseline, learner_owners
from fedloom.runs.workspace import prepare_workspace
from tests.conftest import small_config


def test_the_constant_is_each_clients_training_mean_and_its_train_loss_is_one_half():
    ws = prepare_workspace(small_config())
    got = constant_baseline(learner_owners(ws.learners))
    assert got["train_loss"] == pytest.approx(0.5)
    mse = []
    for learner in ws.learners.values():
        y = learner.targets.numpy()
        mean = y[learner.data.train].mean()
        mse.append(np.mean((y[learner.data.test] - mean) ** 2))
    assert got["test/mse/macro"] == pytest.approx(np.mean(mse), rel=1e-5)
    assert np.isnan(got["test/ic/macro"])  # a constant ranks nothing: its IC is undefined


def test_a_run_reports_the_constant_beside_its_train_loss_and_the_table_shows_both(tmp_path):
    from fedloom.results.load import find_runs
    from fedloom.results.table import build_tables
    from fedloom.runs import run

    summary = run(small_config(), tmp_path / "run")
    assert summary["baseline"]["train_loss"] == pytest.approx(0.5)
    (table,) = build_tables(find_runs([tmp_path]))
    labels = [c.label for c in table.columns]
    assert {"train loss", "train loss const", "MSE const"} <= set(labels)
    assert table.rows[0].cells["train loss const"].mean == pytest.approx(0.5)


def test_a_one_pass_reference_reports_the_same_constant_as_an_llm_run_on_its_rows(tmp_path):
    from fedloom.runs import run

    cfg = small_config(method="ridge-probe", **{"references.ridge_probe.inputs": "covariates"})
    reference = run(cfg, tmp_path / "probe")["baseline"]
    llm = constant_baseline(learner_owners(prepare_workspace(small_config()).learners))
    assert reference["train_loss"] == pytest.approx(0.5)
    assert set(reference) == set(llm)
    for key, value in llm.items():
        assert reference[key] == pytest.approx(value, rel=1e-6, nan_ok=True), key


def _text_table():
    """Two clients' instruction rows: ARC letters, sentiments and edits, every answer chosen by hand."""
    import pandas as pd

    from fedloom.data.schema import ClientData, TextTable

    rows = [  # (task, split, label, source, reference)
        ("arc_challenge", "train", "B", "", "B"), ("arc_challenge", "train", "B", "", "B"),
        ("arc_challenge", "train", "A", "", "A"), ("arc_challenge", "test", "B", "", "B"),
        ("arc_challenge", "test", "C", "", "C"),                                      # client a: rows 0-4
        ("tweeteval", "train", "positive", "", "positive"), ("tweeteval", "train", "negative", "", "negative"),
        ("tweeteval", "test", "negative", "", "negative"), ("jfleg", "test", "", "he go home", "he goes home"),
        ("arc_challenge", "test", "D", "", "D"),                                      # client b: rows 5-9
        ("arc_challenge", "train", "C", "", "C"),                                     # client b: row 10
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["task", "split", "label", "source", "ref"])
    frame = frame.assign(id=[f"r{i}" for i in range(len(rows))], prompt="p", response=frame["ref"].where(
        frame["ref"] != "", "x"), references=frame["ref"].map(lambda r: (r,)))  # fmt: skip
    idx = np.arange(len(rows))
    owners = []
    for name, part in (("a", idx[:5]), ("b", idx[5:])):
        owners.append(
            ClientData(name, *(part[frame["split"].to_numpy()[part] == s] for s in ("train", "val", "test")))
        )
    return TextTable(frame.drop(columns="ref"), "mix"), owners


def test_the_text_trivial_predictor_answers_each_clients_majority_and_copies_what_it_edits():
    from fedloom.runs.baseline import text_baseline

    table, owners = _text_table()
    got = text_baseline(table, owners)
    # client a: majority B (2 of 3) → test B, C: 0.5. client b: its own ARC majority C (row 10) → D: 0;
    # its sentiments tie 1-1 → "negative" (the smaller, like DummyClassifier) → 1; the edit copied unchanged
    assert got["test/arc_challenge/score/macro"] == pytest.approx((0.5 + 0.0) / 2)
    assert got["test/tweeteval/score/macro"] == pytest.approx(1.0)
    # "he go home" against "he goes home": ROUGE-1 and ROUGE-Lsum 2/3, ROUGE-2 0 → their mean 4/9
    assert got["test/jfleg/score/macro"] == pytest.approx(4 / 9)
    # each client's score is the mean of its tasks (a: ARC only; b: ARC, TweetEval, JFLEG), then the macro
    assert got["test/score/macro"] == pytest.approx((0.5 + (0.0 + 1.0 + 4 / 9) / 3) / 2)
    assert not any("loss" in k for k in got) and "train_loss" not in got  # no teacher-forced loss to report


def test_a_client_without_training_rows_of_a_task_answers_the_federations_majority():
    from fedloom.runs.baseline import text_baseline

    table, (a, b) = _text_table()
    b = type(b)("b", b.train[b.train != 10], b.val, b.test)  # b no longer trains on ARC: the federation says B
    got = text_baseline(table, [a, b])
    assert got["test/arc_challenge/score/macro"] == pytest.approx((0.5 + 0.0) / 2)  # b's test D: B still misses
    b_test = type(b)("b", b.train, b.val, np.array([9, 3]))  # give b a B-row too: the pooled guess B hits it
    got = text_baseline(table, [a, b_test])
    assert got["test/arc_challenge/score/macro"] == pytest.approx((0.5 + 0.5) / 2)


def test_an_instruction_run_reports_the_trivial_predictor_and_the_table_shows_it_beside_the_score(tmp_path):
    from fedloom.results.load import find_runs
    from fedloom.results.table import build_tables
    from fedloom.runs import run
    from tests.conftest import SHARED_DATA

    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data bundle not found at {SHARED_DATA}")
    sizes = {"data.text.train_size": 12, "data.text.val_size": 2, "data.text.test_size": 3, "data.num_clients": 3}
    tokens = {
        "prompt.max_tokens": 40,
        "generation.max_new_tokens": "{gsm8k: 2, arc_challenge: 2, tweeteval: 2, jfleg: 2}",
    }
    cfg = small_config(
        dataset="multitask", method="fedit", rounds=1, **{"data.data_dir": str(SHARED_DATA)}, **sizes, **tokens
    )
    summary = run(cfg, tmp_path / "run")
    baseline = summary["baseline"]
    assert 0 < baseline["test/jfleg/score/macro"] <= 1  # the sentence copied unchanged shares words with its fixes
    (table,) = build_tables(find_runs([tmp_path]))
    labels = [c.label for c in table.columns]
    assert {"train loss", "score const", "jfleg/score const"} <= set(labels) and "train loss const" not in labels
    assert table.rows[0].cells["score const"].mean == pytest.approx(baseline["test/score/macro"])


def test_a_local_ridge_probe_fits_each_clients_training_rows_at_least_as_well_as_its_constant(tmp_path):
    """Ridge with an unpenalized intercept minimizes MSE + α·|w|², which at w = 0 is the constant's MSE:
    in sample it can never lose to the client's training mean, whatever α validation picks."""
    import json

    from fedloom.runs import run

    cfg = small_config(
        method="ridge-probe", **{"references.mode": "local", "references.ridge_probe.inputs": "covariates"}
    )
    summary = run(cfg, tmp_path / "probe")
    (record,) = [json.loads(line) for line in (tmp_path / "probe" / "metrics.jsonl").read_text().splitlines()]
    losses = {c: m["train_loss"] for c, m in record["train"].items()}
    assert set(losses) == set(summary["per_client"]) and all(0 < v <= 0.5 + 1e-6 for v in losses.values()), losses
    assert summary["metrics"]["train_loss/final_round"] == pytest.approx(np.mean(list(losses.values())))
    assert summary["baseline"]["train_loss"] == pytest.approx(0.5)
