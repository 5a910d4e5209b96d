"""`fedloom table` on hand-made run directories: aggregation over seeds, best cells by direction, the
bootstrap marker, communication per client-round, and well-formed Markdown / CSV / LaTeX."""

from __future__ import annotations

import io
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.errors import ConfigError
from fedloom.results.compare import Comparison, corrected, holm
from fedloom.results.load import find_runs
from fedloom.results.render import format_p, to_csv, to_latex, to_markdown
from fedloom.results.table import Column, build_tables, lookup

DATES = pd.bdate_range("2024-01-01", periods=20)  # four trading weeks


def write_run(
    folder: Path, seed: int, ic: float, mse: float, daily_ic: np.ndarray | None = None, clients: int = 2
) -> Path:
    """A run directory with what a table reads: summary.json, metrics.jsonl, daily.csv."""
    folder.mkdir(parents=True)
    metrics = {"personal/test/ic/macro": ic, "personal/test/mse/weighted": mse, "personal/test/mse/macro": mse}
    summary = {
        "method": "fedavg", "dataset": "synthetic", "primary_metric": "ic", "seed": seed, "rounds": 2,
        "metrics": metrics, "final_metrics": metrics, "per_client": {f"c{i}": {} for i in range(clients)},
        "communication": {"download_bytes": 8000, "upload_bytes": 4000}, "wall_seconds": 10.0,
    }  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    rounds = [{"round": 1, "download_bytes": {"c0": 4000}}, {"round": 2, "download_bytes": {"c1": 4000}}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    if daily_ic is not None:
        pd.DataFrame({"ic": daily_ic}, index=pd.Index(DATES, name="date")).to_csv(folder / "daily.csv")
    return folder


def noise(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.05, len(DATES))


def test_rows_are_mean_and_std_over_seeds_with_the_best_cell_by_direction(tmp_path: Path):
    # Prepare: row "a" has the higher IC (better), row "b" the lower MSE (better)
    write_run(tmp_path / "seed0" / "a", 0, ic=0.1, mse=0.004)
    write_run(tmp_path / "seed1" / "a", 1, ic=0.3, mse=0.006)
    write_run(tmp_path / "seed0" / "b", 0, ic=0.0, mse=0.001)
    write_run(tmp_path / "seed1" / "b", 1, ic=0.0, mse=0.003)

    # Execute
    (table,) = build_tables(find_runs([tmp_path]))

    # Assert
    rows = {r.name: r for r in table.rows}
    assert rows["a"].seeds == (0, 1)
    assert rows["a"].cells["IC"].mean == pytest.approx(0.2)
    assert rows["a"].cells["IC"].std == pytest.approx(statistics.stdev([0.1, 0.3]))  # sample std, ddof 1
    assert rows["b"].cells["MSE"].mean == pytest.approx(0.002)
    assert table.best["IC"] == {"a"} and table.best["MSE"] == {"b"}
    markdown = to_markdown([table])
    assert "| a | 2 (0,1) | **0.200 ± 0.141** |" in markdown
    assert "| b | 2 (0,1) | 0.000 ± 0.000 | **0.00200 ± 0.00141** |" in markdown  # three significant digits


def test_communication_is_per_participating_client_round(tmp_path: Path):
    # 8000 bytes down over 2 participations (one client in each of 2 rounds), not over 2 rounds x 2 clients
    write_run(tmp_path / "run", 0, ic=0.1, mse=0.1)
    (table,) = build_tables(find_runs([tmp_path / "run"]))
    assert table.rows[0].cells["KB down"].mean == pytest.approx(4.0)
    assert table.rows[0].cells["KB up"].mean == pytest.approx(2.0)


def test_seconds_per_round_come_from_the_logged_rounds_when_they_carry_them(tmp_path: Path):
    """A resumed run that replayed no round has a summary wall time near 0; its logged rounds keep the
    real time (local + server + evaluation; client compute and aggregation are parts of those)."""
    write_run(tmp_path / "plain", 0, ic=0.1, mse=0.1)
    resumed = write_run(tmp_path / "resumed", 0, ic=0.1, mse=0.1)
    summary = json.loads((resumed / "summary.json").read_text()) | {"wall_seconds": 4e-5}
    (resumed / "summary.json").write_text(json.dumps(summary))
    seconds = {"local": 30.0, "client_compute": 29.0, "aggregate": 0.5, "server": 1.0, "evaluate": 80.0}
    rounds = [{"round": k, "download_bytes": {"c0": 4000}, "seconds": seconds} for k in (1, 2)]
    (resumed / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    cells = {Path(r.name).name: r.cells for t in build_tables(find_runs([tmp_path])) for r in t.rows}
    assert cells["plain"]["s/round"].mean == pytest.approx(5.0)  # no logged seconds: 10 s wall / 2 rounds
    assert cells["resumed"]["s/round"].mean == pytest.approx(111.0)


def test_the_bootstrap_marks_a_clearly_better_row_and_not_an_identical_one(tmp_path: Path):
    base = [noise(s) for s in (0, 1)]
    for s in (0, 1):
        write_run(tmp_path / f"seed{s}" / "ref", s, 0.0, 0.1, base[s])
        write_run(tmp_path / f"seed{s}" / "better", s, 0.1, 0.1, base[s] + 0.1 + noise(10 + s) / 5)
        write_run(tmp_path / f"seed{s}" / "same", s, 0.0, 0.1, base[s])

    (table,) = build_tables(find_runs([tmp_path]), reference="ref")

    rows = {r.name: r for r in table.rows}
    assert table.rows[0].name == "ref" and rows["ref"].comparison is None
    better, same = rows["better"].comparison, rows["same"].comparison
    assert better is not None and same is not None
    assert better.mean_difference == pytest.approx(0.1, abs=0.02) and better.p_value < 0.05 and better.ci_low > 0
    assert same.mean_difference == 0 and same.p_value == 1 and same.seed_p_value == 1
    lines = {line.split(" | ")[0].removeprefix("| "): line for line in to_markdown([table]).splitlines()}
    assert " p < 0.001 q < 0.001 *" in lines["better"] and "*" not in lines["same"].split(" | ")[-1]


def test_final_compares_the_last_rounds_daily_series_and_says_so(tmp_path: Path):
    """A row better at its chosen round and identical after the last round: the default table marks it,
    `final` (daily_final.csv) does not, and each table's notes name the file it compared."""
    for s in (0, 1):
        base = noise(s)
        for row, chosen in (("ref", base), ("early", base + 0.1)):
            folder = write_run(tmp_path / f"seed{s}" / row, s, 0.0, 0.1, chosen)
            pd.DataFrame({"ic": base}, index=pd.Index(DATES, name="date")).to_csv(folder / "daily_final.csv")

    chosen, final = (build_tables(find_runs([tmp_path], final=f), reference="ref")[0] for f in (False, True))

    assert chosen.rows[1].comparison is not None and chosen.rows[1].comparison.p_value < 0.05
    assert math.isnan(chosen.rows[1].comparison.seed_p_value)  # +0.1 on both seeds (to round-off): no spread
    assert final.rows[1].comparison is not None and final.rows[1].comparison.mean_difference == 0
    text = {f: to_markdown([t]) for f, t in ((False, chosen), (True, final))}
    assert "daily_final.csv: the models after the last round" in text[True] and "(final) vs ref" in text[True]
    assert "daily.csv: the round chosen on validation" in text[False] and "(final)" not in text[False]
    assert set(pd.read_csv(io.StringIO(to_csv([final])))["daily_file"].dropna()) == {"daily_final.csv"}


def test_the_seed_test_tells_one_seeds_offset_from_a_shift_on_every_seed(tmp_path: Path):
    """`one` is +0.3 on seed 0 and equal on seeds 1-2: the week bootstrap of the seed-mean series marks
    it (+0.1 on every week), the paired t-test over seeds does not; `every` is +0.1 on each seed."""
    for s in (0, 1, 2):
        base = noise(s)
        write_run(tmp_path / f"seed{s}" / "ref", s, 0.0, 0.1, base)
        write_run(tmp_path / f"seed{s}" / "one", s, 0.0, 0.1, base + (0.3 if s == 0 else 0.0))
        write_run(tmp_path / f"seed{s}" / "every", s, 0.0, 0.1, base + 0.1 + noise(10 + s) / 5)

    (table,) = build_tables(find_runs([tmp_path]), reference="ref")

    one, every = ({r.name: r for r in table.rows}[name].comparison for name in ("one", "every"))
    assert one is not None and every is not None
    assert one.mean_difference == pytest.approx(0.1) and one.p_value < 0.05 and one.seed_p_value > 0.3
    assert every.p_value < 0.05 and every.seed_p_value < 0.05
    lines = {line.split(" | ")[0].removeprefix("| "): line for line in to_markdown([table]).splitlines()}
    assert lines["one"].endswith(
        f" p {format_p(one.p_value)} q {format_p(one.q_value)} *; seeds p {one.seed_p_value:.3f} |"
    )


def test_an_unknown_reference_row_names_the_rows(tmp_path: Path):
    write_run(tmp_path / "fedavg", 0, 0.1, 0.1)
    with pytest.raises(ConfigError, match=r"--reference 'rpa' is not a row; rows: fedavg"):
        build_tables(find_runs([tmp_path]), reference="rpa")
    (alone,) = build_tables(find_runs([tmp_path]), reference="fedavg")  # the reference alone: nothing to compare
    assert [r.name for r in alone.rows] == ["fedavg"] and alone.rows[0].comparison is None


def write_paired(folder: Path, seed: int, ic: float, client_ic: list[float], daily: np.ndarray) -> None:
    """A run whose clients c0..c3 have heterogeneity scores 0.1..0.4 and the given per-client test IC."""
    write_run(folder, seed, ic, 0.1, daily, clients=len(client_ic))
    summary = json.loads((folder / "summary.json").read_text())
    summary["per_client"] = {f"c{i}": {"heterogeneity": 0.1 * (i + 1), "test/ic": v} for i, v in enumerate(client_ic)}
    (folder / "summary.json").write_text(json.dumps(summary))


def test_a_row_template_compares_each_row_with_its_twin_and_adds_the_gain_and_its_heterogeneity_rho(tmp_path: Path):
    """Seed 000 Table 9: each partition's row against its fixed-route twin — the gain of the headline metric
    per seed (mean ± std over seeds) and Spearman ρ(heterogeneity, per-client gain); a row with no twin
    (the twins themselves, here) is not compared."""
    # Prepare: "a" gains most where clients are most heterogeneous (ρ = 1), "b" the opposite (ρ = −1)
    for s, (a_ic, fixed_ic) in enumerate([(0.3, 0.1), (0.5, 0.2)]):
        base = noise(s)
        write_paired(tmp_path / f"seed{s}" / "a", s, a_ic, [0.1, 0.2, 0.3, 0.4], base + 0.1 + noise(20 + s) / 5)
        write_paired(tmp_path / f"seed{s}" / "a-fixed", s, fixed_ic, [0.0, 0.0, 0.0, 0.0], base)
        write_paired(tmp_path / f"seed{s}" / "b", s, 0.2, [0.4, 0.3, 0.2, 0.1], base)
        write_paired(tmp_path / f"seed{s}" / "b-fixed", s, 0.2, [0.0, 0.0, 0.0, 0.0], base)

    # Execute
    (table,) = build_tables(find_runs([tmp_path]), reference="{row}-fixed")

    # Assert
    rows = {r.name: r for r in table.rows}
    assert [r.name for r in table.rows] == ["a", "a-fixed", "b", "b-fixed"]  # no row is moved to the front
    assert table.partners == {"a": "a-fixed", "b": "b-fixed"}
    gain, rho = rows["a"].cells["gain over {row}-fixed"], rows["a"].cells["ρ(heterogeneity, gain)"]
    assert (gain.mean, gain.std, gain.n) == pytest.approx((0.25, statistics.stdev([0.2, 0.3]), 2))
    assert (rho.mean, rho.n) == (pytest.approx(1.0), 2)
    assert rows["b"].cells["ρ(heterogeneity, gain)"].mean == pytest.approx(-1.0)
    assert rows["b"].cells["gain over {row}-fixed"].mean == pytest.approx(0.0)
    assert rows["a-fixed"].cells["gain over {row}-fixed"].n == 0 and rows["a-fixed"].comparison is None
    better, same = rows["a"].comparison, rows["b"].comparison
    assert better is not None and better.p_value < 0.05 and better.mean_difference == pytest.approx(0.1, abs=0.02)
    assert same is not None and same.mean_difference == 0
    assert table.best["gain over {row}-fixed"] == {"a"}
    frame = pd.read_csv(io.StringIO(to_csv([table])))
    assert frame.set_index("row").loc["a", "reference"] == "a-fixed"
    assert "each row against the row its name makes" in to_markdown([table])


def test_the_clients_test_tells_one_clients_gain_from_a_gain_on_every_client(tmp_path: Path):
    """Beside the week bootstrap, a paired t-test over clients of their seed-mean test metric: a gain one
    client carries has a large clients p, a gain on every client a small one (= scipy's one-sample t-test
    of the per-client differences)."""
    from scipy.stats import ttest_1samp

    one, every = [0.8, 0.0, 0.0, 0.0], [0.21, 0.19, 0.22, 0.18]
    for s in (0, 1):
        write_paired(tmp_path / f"seed{s}" / "ref", s, 0.0, [0.0, 0.0, 0.0, 0.0], noise(s))
        write_paired(tmp_path / f"seed{s}" / "one", s, 0.2, one, noise(s) + 0.2 + noise(30 + s) / 5)
        write_paired(tmp_path / f"seed{s}" / "every", s, 0.2, every, noise(s) + 0.2 + noise(40 + s) / 5)

    (table,) = build_tables(find_runs([tmp_path]), reference="ref")

    rows = {r.name: r.comparison for r in table.rows}
    assert rows["one"] is not None and rows["every"] is not None
    assert rows["one"].p_value < 0.05 and rows["every"].p_value < 0.05  # the days cannot tell them apart
    assert rows["one"].clients == 4 and rows["one"].client_p_value == pytest.approx(ttest_1samp(one, 0).pvalue)
    assert rows["one"].client_p_value > 0.3 and rows["every"].client_p_value < 0.001
    line = next(x for x in to_markdown([table]).splitlines() if x.startswith("| one |"))
    assert line.endswith(f"; clients p {format_p(rows['one'].client_p_value)} |")
    assert pd.read_csv(io.StringIO(to_csv([table]))).set_index("row").loc["every", "clients"] == 4


def write_clients(folder: Path, seed: int, gains: list[float]) -> None:
    """A run of 4 clients whose own daily IC is noise plus ``gains[c]``: clients.csv and its macro daily.csv."""
    per_client = np.stack([noise(100 * seed + c) + g for c, g in enumerate(gains)])
    write_run(folder, seed, float(np.mean(gains)), 0.1, per_client.mean(axis=0), clients=len(gains))
    frame = pd.concat(
        pd.DataFrame({"client": f"c{c}", "rows": 5, "ic": per_client[c]}, index=pd.Index(DATES, name="date"))
        for c in range(len(gains))
    )
    frame.to_csv(folder / "clients.csv")


def test_with_each_clients_series_the_bootstrap_resamples_clients_and_weeks(tmp_path: Path):
    """Issue 43: where the runs wrote clients.csv, CI, p and q resample clients and weeks jointly, so a gain
    one client carries is not starred although the week bootstrap alone finds it (`weeks p`), while a gain
    on every client still is; a row whose runs lack the file keeps the week bootstrap, and the notes say which."""
    from fedloom.results.compare import CLIENTS_WEEKS, WEEKS

    for s in (0, 1):
        write_clients(tmp_path / f"seed{s}" / "ref", s, [0.0] * 4)
        write_clients(tmp_path / f"seed{s}" / "one", s, [0.4, 0.0, 0.0, 0.0])
        write_clients(tmp_path / f"seed{s}" / "every", s, [0.1] * 4)
        write_clients(tmp_path / f"seed{s}" / "old", s, [0.1] * 4)
        (tmp_path / f"seed{s}" / "old" / "clients.csv").unlink()  # a run from before clients.csv

    (table,) = build_tables(find_runs([tmp_path]), reference="ref")

    rows = {r.name: r.comparison for r in table.rows}
    one, every, old = rows["one"], rows["every"], rows["old"]
    assert one is not None and every is not None and old is not None
    assert one.resampled == every.resampled == CLIENTS_WEEKS and old.resampled == WEEKS
    assert one.mean_difference == pytest.approx(0.1) and one.week_p_value < 0.01
    assert one.p_value > 0.2 and one.ci_low <= 0 < one.ci_high and one.q_value > 0.05  # 0: no client-0 draw
    assert every.p_value < 0.01 and every.q_value < 0.05 and old.p_value < 0.01
    assert math.isnan(old.week_p_value)
    lines = {x.split(" | ")[0].removeprefix("| "): x for x in to_markdown([table]).splitlines() if x.startswith("|")}
    assert "*" not in lines["one"].split(" | ")[-1] and f"; weeks p {format_p(one.week_p_value)}" in lines["one"]
    assert " *; weeks p " in lines["every"] and "weeks p" not in lines["old"]
    assert "resamples clients and trading weeks jointly" in to_markdown([table])
    assert "for the 2 rows showing `weeks p`" in to_markdown([table])
    frame = pd.read_csv(io.StringIO(to_csv([table]))).set_index("row")
    assert frame.loc["one", "resampled"] == CLIENTS_WEEKS and frame.loc["old", "resampled"] == WEEKS


def write_ranking(folder: Path, seed: int, informative: list[bool], draw: int) -> None:
    """A ranking run of 4 clients of 5 names that predicts the target on the ``informative`` clients' names:
    daily.csv and clients.csv as a run writes them (`runs.daily`)."""
    from fedloom.runs.daily import client_daily_metrics, daily_metrics

    rng = np.random.default_rng(draw)
    client = np.tile(np.repeat(np.arange(4), 5), len(DATES)).astype(str)
    dates = np.repeat(DATES.to_numpy(), 20)
    target = rng.normal(size=len(dates))
    score = np.where(np.asarray(informative)[client.astype(int)], target, 0.0) + rng.normal(size=len(dates))
    p = pd.DataFrame({"client": client, "date": dates, "score": score, "target": target})
    per_client = client_daily_metrics(p, "ranking")
    write_run(folder, seed, 0.0, 0.1, clients=4)
    summary = json.loads((folder / "summary.json").read_text()) | {"primary_metric": "rank_ic"}
    (folder / "summary.json").write_text(json.dumps(summary))
    daily_metrics(p, "ranking", per_client).rename_axis("date").to_csv(folder / "daily.csv")
    per_client.to_csv(folder / "clients.csv")


def test_the_universe_wide_rank_ic_resamples_clients_and_weeks_from_the_clients_moments(tmp_path: Path):
    """Issue 43: a ranking table tests the universe-wide RankIC; where clients.csv carries each client's share
    of it (its moments) the bootstrap redraws clients as well as weeks, so a gain on one owner's names is not
    starred although the weeks alone find it; a gain on every owner's names is."""
    from fedloom.results.compare import CLIENTS_WEEKS

    for s in (0, 1):
        write_ranking(tmp_path / f"seed{s}" / "ref", s, [False] * 4, draw=10 + s)
        write_ranking(tmp_path / f"seed{s}" / "one", s, [True, False, False, False], draw=20 + s)
        write_ranking(tmp_path / f"seed{s}" / "every", s, [True] * 4, draw=30 + s)

    (table,) = build_tables(find_runs([tmp_path]), reference="ref")

    rows = {r.name: r.comparison for r in table.rows}
    one, every = rows["one"], rows["every"]
    assert one is not None and every is not None
    assert one.resampled == every.resampled == CLIENTS_WEEKS
    assert one.mean_difference > 0.1 and one.week_p_value < 0.01 and one.p_value > 0.05
    assert every.p_value < 0.01 and every.q_value < 0.05


def test_the_notes_say_how_often_the_chosen_round_helped_on_test(tmp_path: Path):
    """Issue 43: the round chosen on validation against the last round's models, on test, over the runs."""
    for s, final in enumerate([0.05, 0.3, 0.1, None]):  # chosen IC 0.1 each: helped, hurt, same (twice)
        run = write_run(tmp_path / f"seed{s}" / "a", s, 0.1, 0.1)
        if final is not None:
            summary = json.loads((run / "summary.json").read_text())
            summary["final_metrics"] = {**summary["metrics"], "personal/test/ic/macro": final}
            (run / "summary.json").write_text(json.dumps(summary))
    one_pass = write_run(tmp_path / "seed9" / "probe", 9, 0.5, 0.1)  # a reference fitted once: no choice
    summary = json.loads((one_pass / "summary.json").read_text())
    (one_pass / "summary.json").write_text(json.dumps({**summary, "rounds": 1, "final_metrics": {}}))

    (table,) = build_tables(find_runs([tmp_path]))

    assert table.selection is not None
    assert (table.selection.helped, table.selection.hurt, table.selection.same) == (1, 1, 2)
    assert table.selection.mean_gain == pytest.approx((0.05 - 0.2 + 0 + 0) / 4)
    assert "beat the last round's models on test `ic` in 1 of 4 runs, lost in 1, was the last round in 2" in (
        to_markdown([table])
    )


def test_a_template_that_names_no_row_is_a_config_error(tmp_path: Path):
    write_run(tmp_path / "rpa", 0, 0.1, 0.1)
    with pytest.raises(ConfigError, match=r"'\{row\}-nores' names no row for any row; rows: rpa"):
        build_tables(find_runs([tmp_path]), reference="{row}-nores")


def test_lookup_follows_a_path_and_averages_over_a_star():
    record = {"last_round": {"train": {"c0": {"rho": 0.1}, "c1": {"rho": 0.3}}}, "flag": True}
    assert lookup(record, ("last_round", "train", "*", "rho")) == pytest.approx(0.2)
    assert math.isnan(lookup(record, ("last_round", "missing"))) and math.isnan(lookup(record, ("flag",)))


def test_markdown_csv_and_latex_are_well_formed(tmp_path: Path):
    for s in (0, 1):
        write_run(tmp_path / f"seed{s}" / "ref_row", s, 0.1 * s, 0.01, noise(s))
        write_run(tmp_path / f"seed{s}" / "other", s, 0.2, 0.02, noise(s) + 0.05)
    extra = Column("clients", ("derived", "download_kb"))
    tables = build_tables(find_runs([tmp_path]), reference="ref_row")
    tables_extra = build_tables(find_runs([tmp_path]), [extra], reference="ref_row")

    markdown = [line for line in to_markdown(tables).splitlines() if line.startswith("|")]
    assert len(markdown) == 4 and len({line.count("|") for line in markdown}) == 1

    frame = pd.read_csv(io.StringIO(to_csv(tables)))
    assert list(frame["row"]) == ["ref_row", "other"]
    assert frame.loc[1, "IC"] == pytest.approx(0.2) and frame.loc[0, "IC std"] == pytest.approx(
        statistics.stdev([0.0, 0.1])
    )
    assert frame.loc[1, "p_value"] < 0.05 and math.isnan(frame.loc[0, "p_value"])

    latex = to_latex(tables)
    assert latex.count("{") == latex.count("}") and "ref\\_row" in latex and "$\\pm$" in latex
    body = latex.split("\\midrule\n")[1].split("\\bottomrule")[0].strip().splitlines()
    columns = 2 + len(tables[0].columns) + 1
    assert len(body) == 2 and all(line.count(" & ") == columns - 1 for line in body)
    assert "clients" in to_markdown(tables_extra)


def test_a_comparison_prints_digits_for_its_ci_and_three_for_an_identical_row():
    from fedloom.results.compare import Comparison
    from fedloom.results.render import format_comparison

    assert format_comparison(Comparison(0.0, 0.0, 0.0, 1.0, 64, 3)) == "+0.000 [+0.000, +0.000] p 1.000"
    assert format_comparison(Comparison(0.0002, -0.0007, 0.0011, 0.7, 64, 3)) == "+0.0002 [-0.0007, +0.0011] p 0.700"
    assert format_comparison(Comparison(0.05, 0.01, 0.09, 0.01, 64, 3)).endswith("p 0.010 *")
    # with a family correction the star follows q: p 0.01 among many rows can be q 0.2
    assert format_comparison(Comparison(0.05, 0.01, 0.09, 0.01, 64, 3, q_value=0.2)).endswith("p 0.010 q 0.200")


def test_gain_correlation_is_spearman_and_undefined_for_a_constant_side():
    import warnings

    from scipy.stats import spearmanr

    from fedloom.results.compare import gain_correlation

    h, g = [0.1, 0.5, 0.3, float("nan")], [1.0, 3.0, 2.5, 9.0]
    rho, n = gain_correlation(h, g)
    assert n == 3 and rho == pytest.approx(spearmanr(h[:3], g[:3]).statistic)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConstantInputWarning reaches the user
        rho, n = gain_correlation([0.1, 0.5, 0.3], [0.0, 0.0, 0.0])
    assert n == 3 and math.isnan(rho)


def test_holm_on_a_hand_computed_family():
    # sorted p 0.01, 0.02, 0.03, 0.5 times 4, 3, 2, 1 = 0.04, 0.06, 0.06, 0.5 (already non-decreasing)
    np.testing.assert_allclose(holm([0.03, 0.01, 0.5, 0.02]), [0.06, 0.04, 0.5, 0.06])
    np.testing.assert_allclose(holm([0.04, 0.01]), [0.04, 0.02])  # the larger p keeps the smaller's bound
    assert holm([0.9, 0.8]).max() == 1.0  # capped


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=12))
def test_every_rows_q_is_scipys_benjamini_hochberg_over_the_tables_rows(p_values):
    """The q of each compared row is scipy's BH over the family of rows compared in one table; Holm never
    falls below BH nor below the raw p; a row not compared stays uncorrected."""
    from scipy.stats import false_discovery_control

    family = [Comparison(0.0, -1.0, 1.0, p, 64, 1) for p in p_values]
    out = corrected([None, *family])
    assert out[0] is None
    q = [c.q_value for c in out[1:]]
    np.testing.assert_allclose(q, false_discovery_control(p_values, method="bh"), rtol=1e-12)
    for c in out[1:]:
        assert c.holm_p >= c.q_value - 1e-12 and c.holm_p >= c.p_value - 1e-12


def test_the_table_corrects_over_its_rows_and_stars_by_q(tmp_path: Path):
    """Ten rows against one reference: the CSV carries q and Holm beside p, q is BH of the rows' p, and
    the star follows q."""
    from scipy.stats import false_discovery_control

    for s in (0, 1):
        write_run(tmp_path / f"seed{s}" / "ref", s, 0.0, 0.1, noise(s))
        for k in range(10):
            write_run(tmp_path / f"seed{s}" / f"r{k}", s, 0.0, 0.1, noise(s) + noise(100 + 10 * k + s) / 3)
    (table,) = build_tables(find_runs([tmp_path]), reference="ref")
    frame = pd.read_csv(io.StringIO(to_csv([table]))).dropna(subset=["p_value"])
    assert len(frame) == table.compared == 10
    np.testing.assert_allclose(frame["q_value"], false_discovery_control(frame["p_value"], method="bh"))
    assert (frame["holm_p"] >= frame["p_value"]).all()
    lines = {line.split(" | ")[0].removeprefix("| "): line for line in to_markdown([table]).splitlines()}
    for row in table.rows[1:]:
        assert row.comparison is not None
        cell = lines[row.name].rstrip(" |").split(" | ")[-1].split(";")[0]
        assert cell.endswith("*") == (row.comparison.q_value < 0.05)
    assert "Benjamini–Hochberg over the 10 rows compared" in to_markdown([table])
    assert (frame["mde"] > 0).all()  # each row's detectable effect, and their median in the notes
    assert f"could detect: a true difference in daily `ic` of {frame['mde'].median():.3g}" in to_markdown([table])


def test_default_columns_add_regime_spread_and_trainable_parameters_where_a_run_has_them():
    from fedloom.results.table import default_columns

    base = {"primary_metric": "rank_ic", "metrics": {"personal/test/rank_ic/macro": 0.01}}
    plain = [c.label for c in default_columns(base)]
    assert "regime std" not in plain and "trainable" not in plain
    rich = {**base, "regimes": {"regime_std": 0.05, "worst_regime_drop": 0.15},
            "trainable_params": {"mean": 1000.0, "max": 1200.0, "per_client": {}}}  # fmt: skip
    columns = {c.label: c for c in default_columns(rich)}
    assert columns["regime std"].path == ("regimes", "regime_std") and columns["regime std"].higher is False
    assert columns["worst regime drop"].path == ("regimes", "worst_regime_drop")
    assert columns["trainable"].path == ("trainable_params", "mean")
    assert lookup(rich, columns["trainable"].path) == 1000


@pytest.mark.parametrize(
    ("primary", "columns", "expected"),
    [
        ("rank_ic", ["ic", "rank_ic", "ic_pooled", "rank_ic_pooled"], "rank_ic_pooled"),  # the universe, Qlib's
        ("rank_ic", ["ic", "rank_ic"], "rank_ic"),
        ("ic", ["ic", "rank_ic", "ic_pooled", "rank_ic_pooled", "mse"], "ic"),  # regression keeps its own
        ("accuracy", ["accuracy"], "accuracy"),
    ],
)
def test_a_ranking_table_tests_the_universe_wide_rank_ic(primary, columns, expected):
    from fedloom.results.compare import daily_column
    from fedloom.results.load import RunResult

    daily = pd.DataFrame(np.zeros((2, len(columns))), columns=columns)
    run = RunResult(Path("x"), "row", 0, "csi300", {"primary_metric": primary}, daily, "daily.csv")
    assert daily_column([run]) == expected


def test_a_fnspid_table_says_what_the_bundled_fnspid_is(tmp_path: Path):
    """Issue 43: FNSPID's tables say it is prices + sentiment with text for one ticker; others say nothing."""
    from fedloom.data.fnspid import WHAT_IT_IS

    for dataset in ("fnspid", "synthetic"):
        folder = write_run(tmp_path / dataset / "fedavg", 0, 0.0, 0.1, noise(0))
        summary = json.loads((folder / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps({**summary, "dataset": dataset}))

    tables = {t.dataset: t for t in build_tables(find_runs([tmp_path]))}

    assert f"Data: {WHAT_IT_IS}." in to_markdown([tables["fnspid"]]) and "news text exists only for AA" in WHAT_IT_IS
    assert "Data:" not in to_markdown([tables["synthetic"]])


def test_the_notes_say_which_rows_report_the_fitted_train_loss(tmp_path: Path):
    """A row whose runs report train.train_loss: fitted is named in the notes (its train loss is comparable with
    the constant's); rows measured by the steps' mini-batches, or by runs older than the key, are not."""
    for row, measure in [("a", "fitted"), ("b", "steps"), ("c", None)]:
        folder = write_run(tmp_path / row, 0, ic=0.1, mse=0.1)
        if measure is not None:
            summary = json.loads((folder / "summary.json").read_text())
            (folder / "summary.json").write_text(json.dumps({**summary, "train_loss_measure": measure}))
    (table,) = build_tables(find_runs([tmp_path]))
    assert table.train_loss_measures == {"a": "fitted", "b": "steps"}
    (line,) = [n for n in to_markdown([table]).splitlines() if n.startswith("`train loss` of")]
    assert "`a`" in line and "`b`" not in line and "`c`" not in line
    write_run(tmp_path / "again" / "b", 1, ic=0.1, mse=0.1)  # a seed without the key: the row's measure is unknown
    (table,) = build_tables(find_runs([tmp_path]))
    assert "b" not in table.train_loss_measures
