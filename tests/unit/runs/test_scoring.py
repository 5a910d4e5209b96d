"""federation.test_rounds=chosen: validation alone each round, the test split once for the chosen and
the last round at the end. The reported numbers must be the every-round ones, from fewer test passes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedloom.apps.serverapp import serve
from fedloom.errors import ConfigError
from fedloom.results.load import find_runs
from fedloom.results.page import round_series
from fedloom.runs.llm import run_method
from fedloom.runs.workspace import prepare_workspace
from fedloom.tasks.learner import SINGLE, Learner, Mixture
from tests.conftest import small_config

GLOBAL_MODEL = {"fedavg": False, "ditto": True, "rpa": False}  # ditto also evaluates its shared model


def _flat(value: object, key: str = "") -> dict[str, object]:
    if isinstance(value, Mapping):
        return {k: v for name, item in value.items() for k, v in _flat(item, f"{key}/{name}").items()}
    return {key: value}


def _same(a: object, b: object) -> bool:
    """Equal, floats to tolerance and NaN included: a checkpoint's tensors are bit-equal to the in-memory ones,
    but CPU matmul kernels may take another path for another memory alignment (last-bit differences in RPA)."""
    fa, fb = _flat(a), _flat(b)
    floats = [k for k, v in fa.items() if isinstance(v, float)]
    close = np.allclose([fa[k] for k in floats], [fb.get(k, np.nan) for k in floats], rtol=1e-6, atol=1e-9,
                        equal_nan=True)  # fmt: skip
    return fa.keys() == fb.keys() and bool(close) and all(fa[k] == fb[k] for k in fa if k not in floats)


@pytest.mark.parametrize("method", sorted(GLOBAL_MODEL))
def test_chosen_round_test_gives_the_every_round_numbers_from_fewer_test_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
):
    passes = {"test": 0}
    predict = Learner.predict

    def counted(self: Learner, params: Mapping, split: str, mixture: Mixture = SINGLE):
        passes["test"] += split == "test"
        return predict(self, params, split, mixture)

    monkeypatch.setattr(Learner, "predict", counted)
    summaries, counts = {}, {}
    for mode in ("all", "chosen"):
        cfg = small_config(rounds=4, seed=0, method=method, **{"train.lr": 0.05, "federation.test_rounds": mode})
        ws = prepare_workspace(cfg)
        passes["test"] = 0
        summaries[mode] = run_method(cfg, ws, tmp_path / mode)
        counts[mode] = passes["test"]
    every, chosen = summaries["all"], summaries["chosen"]
    for key in ("selection", "metrics", "final_metrics", "per_client", "outputs_round", "cross_section"):
        assert _same(every[key], chosen[key]), key
    assert any(k.startswith("personal/test/") for k in chosen["metrics"])
    for name in ("daily.csv", "daily_final.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "all" / name), pd.read_csv(tmp_path / "chosen" / name),
                                      rtol=1e-6)  # fmt: skip

    # test passes (one per client model): every round's evaluation + daily.csv's rounds, against those rounds only
    clients, models = len(ws.learners), 1 + GLOBAL_MODEL[method]
    reported = len({every["selection"]["best_round"], 4})
    assert counts["all"] == clients * (4 * models + reported)
    assert counts["chosen"] == clients * reported * models
    logged = [json.loads(line) for line in (tmp_path / "chosen" / "metrics.jsonl").read_text().splitlines()]
    assert all(not any("/test/" in k for k in r["summary"]) for r in logged)  # the round loop tested nothing

    # the report's test curve: every round for `all`, the chosen and last rounds for `chosen`, the same values
    curves = {mode: round_series(find_runs([tmp_path / mode])[0], "ic", "test").dropna() for mode in summaries}
    assert list(curves["all"].index) == [1, 2, 3, 4]
    assert list(curves["chosen"].index) == sorted({every["selection"]["best_round"], 4})
    assert np.allclose(curves["chosen"], curves["all"][curves["chosen"].index], rtol=1e-6)


def test_chosen_round_test_needs_a_checkpoint_of_every_evaluated_round():
    with pytest.raises(ConfigError, match="checkpoint_every=2 must divide eval_every=3"):
        small_config(**{"federation.test_rounds": "chosen", "federation.checkpoint_every": 2,
                        "federation.eval_every": 3})  # fmt: skip
    with pytest.raises(ConfigError, match="checkpoint_every=0"):
        small_config(**{"federation.test_rounds": "chosen", "federation.checkpoint_every": 0})
    small_config(**{"federation.test_rounds": "chosen", "federation.checkpoint_every": 2, "federation.eval_every": 4})


def test_flower_refuses_chosen_round_test_before_touching_the_run_directory(tmp_path: Path):
    cfg = small_config(**{"federation.test_rounds": "chosen"})
    with pytest.raises(ConfigError, match="in process only"):
        serve(None, cfg, tmp_path / "run", num_nodes=1)  # type: ignore[arg-type]
    assert not (tmp_path / "run").exists()
