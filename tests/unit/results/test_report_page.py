"""`fedloom report` on a tiny comparison (FedAvg and RPA, two seeds): every figure the runs have data
for is drawn, each <img> points at a PNG that exists, and the pure helpers behind the figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedloom.results.compare import client_gains
from fedloom.results.figures_methods import pareto_figure, pareto_front
from fedloom.results.load import find_runs
from fedloom.results.page import route_snapshots, write_report
from fedloom.runs.llm import run_method
from fedloom.runs.workspace import prepare_workspace
from tests.conftest import small_config

PNG = b"\x89PNG\r\n\x1a\n"


def tiny_comparison(root: Path, seeds: tuple[int, ...] = (0, 1), rounds: int = 3) -> Path:
    """``root/seed<k>/<method>`` for FedAvg and RPA on the tiny synthetic market (seconds each)."""
    for seed in seeds:
        cfg = small_config(rounds=rounds, seed=seed)
        ws = prepare_workspace(cfg)
        for method in ("fedavg", "rpa"):
            run_method(cfg.model_copy(update={"method": method}), ws, root / f"seed{seed}" / method)
    return root


def add_financial_extras(run_dir: Path) -> None:
    """Give a run the portfolio and regime outputs of an index dataset (hand-made numbers)."""
    days = pd.bdate_range("2024-01-02", periods=12)
    rng = np.random.default_rng(0)
    report = pd.DataFrame({"return": rng.normal(0, 0.01, 12), "cost": 0.0005, "turnover": 0.1,
                           "value": 1e8, "bench": rng.normal(0, 0.01, 12)}, index=days)  # fmt: skip
    report.to_csv(run_dir / "portfolio.csv", index_label="date")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["regimes"] = {"regime/bear": 0.01, "regime/neutral": 0.03, "regime/bull": -0.02, "regime_std": 0.02}
    (run_dir / "summary.json").write_text(json.dumps(summary))


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tiny_comparison(tmp_path_factory.mktemp("report") / "cmp")
    for seed in (0, 1):
        add_financial_extras(root / f"seed{seed}" / "rpa")
    return root


def _images(page: Path) -> list[str]:
    return re.findall(r"<img src='([^']+)'", page.read_text())


def test_a_comparison_report_has_every_figure_it_has_data_for(comparison: Path):
    page = write_report(comparison)
    images = _images(page)
    names = {Path(i).stem.removeprefix("synthetic-") for i in images}
    assert names == {"rounds", "daily-ic", "daily-rank_ic", "portfolio", "regimes", "gain-heterogeneity", "pareto",
                     "routing", "routes-rpa"}  # fmt: skip
    for image in images:
        assert (comparison / image).read_bytes().startswith(PNG)
    text = page.read_text()
    assert "<table>" in text and "<td>rpa</td>" in text and "<td>fedavg</td>" in text


def test_a_single_run_report_draws_its_own_figures_and_no_comparison(comparison: Path, tmp_path: Path):
    page = write_report(comparison / "seed0" / "rpa", out=tmp_path)
    names = {Path(i).stem.removeprefix("synthetic-") for i in _images(page)}
    assert {"rounds", "routing", "routes-rpa", "portfolio", "regimes"} <= names
    assert not names & {"gain-heterogeneity", "pareto"}  # nothing to compare with
    assert all((tmp_path / i).is_file() for i in _images(page))


def test_route_snapshots_are_evenly_spaced_rounds_of_the_uploaded_routes(comparison: Path):
    run = next(r for r in find_runs([comparison / "seed0" / "rpa"]))
    snapshots = route_snapshots(run)
    assert list(snapshots) == [1, 2, 3]  # three rounds: every one (at most four are shown)
    routes = snapshots[3]
    assert set(routes) == set(run.record["per_client"]) and all(
        sum(r) == pytest.approx(1, abs=1e-2) for r in routes.values()
    )


def test_client_gains_average_over_the_seeds_both_rows_ran(comparison: Path):
    runs = find_runs([comparison])
    rpa = [r for r in runs if r.row == "rpa"]
    fedavg = [r for r in runs if r.row == "fedavg"][:1]  # the reference ran seed 0 only
    gains = client_gains(rpa, fedavg, "test/ic")
    seed0 = next(r for r in rpa if r.seed == 0).record["per_client"]
    base = fedavg[0].record["per_client"]
    assert gains == pytest.approx({c: seed0[c]["test/ic"] - base[c]["test/ic"] for c in base})


def test_a_row_template_draws_each_rows_gain_over_its_twin_and_bubbles_by_trained_parameters(comparison: Path):
    """``--reference '{row}-twin'`` (seed 000 Table 9 / Fig. 4: a row against its own variant) draws the
    gain of each row over its twin; Fig. 7's markers grow with the parameters a client trains."""
    from fedloom.results.page import _comparison_plots

    runs = find_runs([comparison])
    rows = {"rpa": [r for r in runs if r.row == "rpa"], "rpa-twin": [r for r in runs if r.row == "fedavg"]}
    plots = {p.name: p for p in _comparison_plots(rows, "ic", "{row}-twin")}
    gain = plots["gain-heterogeneity"].figure
    assert gain is not None
    legend = [t.get_text() for t in gain.axes[0].get_legend().get_texts()]
    assert len(legend) == 1 and legend[0].startswith("rpa − rpa-twin (ρ = ")
    pareto = plots["pareto"].figure
    assert pareto is not None
    labels = [c.get_label() for c in pareto.axes[0].containers]
    count = rows["rpa"][0].record["trainable_params"]["mean"]
    assert f"rpa ({count / 1e6:.3g} M trained)" in labels
    drawn = pareto_figure({"big": (1.0, 0.1, 0.0), "small": (2.0, 0.2, 0.0), "unknown": (3.0, 0.0, 0.0)}, "ic", True,
                          {"big": 4e6, "small": 1e6})  # fmt: skip
    sizes = {c.get_label(): c.lines[0].get_markersize() for c in drawn.axes[0].containers}
    assert sizes["big (4 M trained)"] == pytest.approx(20.0) and sizes["small (1 M trained)"] == pytest.approx(12.0)
    assert sizes["unknown"] == 5.0  # no count: the plain marker


def test_pareto_front_keeps_the_rows_nothing_beats_on_cost_and_quality():
    points = {"cheap": (1.0, 0.1), "best": (4.0, 0.5), "dominated": (5.0, 0.4), "middle": (2.0, 0.3)}
    assert pareto_front(points, higher=True) == ["cheap", "middle", "best"]
    assert pareto_front({"a": (1.0, 0.3), "b": (2.0, 0.1)}, higher=False) == ["a", "b"]  # lower error wins


def test_a_suite_of_eleven_rows_draws_eleven_line_colours():
    """Seed 000's ACL18 table has 11 rows: no two may share a colour (matplotlib's default cycle has 10)."""
    from fedloom.results.figures import rounds_figure

    rows = {f"row{i}": pd.DataFrame({"seed0": [0.1 * i, 0.2]}, index=[1, 2]) for i in range(11)}
    fig = rounds_figure({"val": rows}, "mcc")
    colours = {line.get_color() for line in fig.axes[0].get_lines()}
    assert len(colours) == 11
