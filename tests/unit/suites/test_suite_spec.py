"""Suite files: the grid expands into jobs with resolved configs, bad suites fail at once with the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedloom.errors import ConfigError
from fedloom.results.compare import ROW_FIELD, partners
from fedloom.runs.config import dump_config
from fedloom.suites.runner import (
    SuiteState,
    cpu_shares,
    estimate,
    job_command,
    job_status,
    stale_keys,
    workspaces,
)
from fedloom.suites.spec import load_suite, select_jobs


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "base.yaml").write_text("backbone: tiny-random-llama\nrounds: 3\n")
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return path


def test_the_grid_expands_into_jobs_with_resolved_configs(tmp_path: Path):
    path = write(tmp_path, """
name: grid
base: base.yaml
set: [train.steps=2]
methods: [fedavg, rpa]
seeds: [0, 1]
switches: {default: {}, m1: {methods.rpa.prototypes: 1}}
""")  # fmt: skip
    suite = load_suite(path)
    assert len(suite.jobs) == 2 * 2 + 2  # fedavg under m1 is fedavg under default: run once
    assert [j.label.row for j in suite.jobs if j.label.method == "fedavg"] == ["fedavg/default"] * 2
    job = next(j for j in suite.jobs if j.label.method == "rpa" and j.label.switches == "m1" and j.label.seed == 1)
    assert job.folder == "synthetic/rpa/m1/seed1" and job.label.row == "rpa/m1"
    assert job.config.methods.rpa.prototypes == 1 and job.config.rounds == 3 and job.config.train.steps == 2
    assert job.config.seed == 1 and job.config.backbone == "tiny-random-llama"


def test_only_keeps_the_matching_jobs_and_refuses_a_pattern_that_matches_none(tmp_path: Path):
    path = write(tmp_path, """
name: grid
base: base.yaml
methods: [fedavg, rpa]
seeds: [0, 1]
switches: {default: {}, m1: {methods.rpa.prototypes: 1}}
""")  # fmt: skip
    suite = load_suite(path)
    assert select_jobs(suite, []) is suite
    kept = select_jobs(suite, ["synthetic/rpa/m1/*", "*/fedavg/*/seed1"])
    assert [j.folder for j in kept.jobs] == [
        "synthetic/fedavg/default/seed1", "synthetic/rpa/m1/seed0", "synthetic/rpa/m1/seed1"
    ]  # fmt: skip
    assert kept.config == suite.config
    with pytest.raises(ConfigError, match=r"--only synthetic/rpa/m2/\* matches no job"):
        select_jobs(suite, ["synthetic/rpa/m1/*", "synthetic/rpa/m2/*"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name: x\nmethods: [fedavg]\nworkers: 2\n", "workers: no such suite key"),
        ("name: x\nmethods: []\n", "methods: List should have at least 1 item"),
        ("name: x\nmethods: [fedavg]\nrow: '{model}'\n", "unknown field(s) ['model']"),
        ("name: x\nmethods: [fedsgd]\n", "job synthetic/fedsgd/default/seed0: invalid config: method: unknown method"),
        ("name: x\nmethods: [rpa]\nswitches: {a: {methods.rpa.protos: 1}}\n", "config key 'methods.rpa.protos'"),
        ("name: x\nmethods: [fedavg, local]\nrow: x\n", "row template 'x' names two jobs 'x'"),
    ],
)
def test_a_bad_suite_names_the_problem(tmp_path: Path, body: str, message: str):
    with pytest.raises(ConfigError) as info:
        load_suite(write(tmp_path, body))
    assert message in str(info.value)


def test_each_distinct_workspace_is_prepared_once_and_references_need_none(tmp_path: Path):
    path = write(tmp_path, """
name: prep
base: base.yaml
methods: [fedavg, rpa, lightgbm]
seeds: [0, 1]
switches: {default: {}, lr: {train.lr: 0.01}, top1: {adapter.layers: 1}, rank2: {adapter.rank: 2}}
""")  # fmt: skip
    suite = load_suite(path)
    first = workspaces(suite.jobs)
    # seeds, methods, training switches and the adapter's rank share a workspace; the adapted layers do not
    # (the frozen prefix is cached below the first of them); LightGBM reads no model cache
    assert [(j.label.method, j.label.switches, j.label.seed) for j in first] == [
        ("fedavg", "default", 0), ("fedavg", "top1", 0)
    ]  # fmt: skip
    assert workspaces([j for j in suite.jobs if j.label.method == "lightgbm"]) == []


def test_cores_are_shared_out_disjointly():
    assert cpu_shares([0, 1, 2, 3], 2) == [[0, 1], [2, 3]]
    assert cpu_shares([0, 1, 2], 2) == [[0], [1]]
    assert cpu_shares([0, 1], 3) == [[0], [1], [0]]


def test_estimates_come_from_measured_jobs_of_the_same_method(tmp_path: Path):
    path = write(tmp_path, "name: e\nmethods: [fedavg, local]\nseeds: [0, 1]\n")
    jobs = load_suite(path).jobs
    times = {"synthetic/fedavg/default/seed0": 100.0, "synthetic/local/default/seed0": 10.0}
    assert estimate(jobs[1], times, jobs) == 100.0  # fedavg seed 1: like fedavg seed 0
    assert estimate(jobs[3], times, jobs) == 10.0
    assert estimate(jobs[0], {}, jobs) is None
    state = SuiteState(total=4, workers=2, pending=[jobs[1], jobs[3]], estimates={j.folder: 50.0 for j in jobs})
    state.running[jobs[0].folder] = 0.0
    assert state.eta(now=20.0) == pytest.approx((50 + 50 + 30) / 2)


def test_every_job_command_carries_the_suite_wide_arguments_also_on_resume(tmp_path: Path):
    suite = load_suite(write(tmp_path, "name: t\nbase: base.yaml\nmethods: [fedavg]\n"))
    job, out = suite.jobs[0], tmp_path / "out"
    fresh = job_command(job, suite, out, ("--track", "mlflow"))
    assert fresh[fresh.index("run") + 1 : fresh.index("run") + 3] == ["--track", "mlflow"] and "--resume" not in fresh
    (out / job.folder).mkdir(parents=True)
    (out / job.folder / "config.yaml").write_text(dump_config(job.config))  # a started run
    resumed = job_command(job, suite, out, ("--track", "mlflow"))
    assert resumed[-4:] == ["--track", "mlflow", "--resume", str(out / job.folder)]


def test_a_stopped_one_pass_reference_starts_over_and_a_federated_one_resumes(tmp_path: Path):
    """A reference fitted in one pass has no checkpoint: its partial folder is replaced (--overwrite),
    never handed to --resume, which it would refuse; a federated reference has rounds and resumes."""
    suite = load_suite(write(tmp_path, """
name: refs
base: base.yaml
methods: [mlp]
switches: {pooled: {references.mode: pooled}, federated: {references.mode: federated}}
"""))  # fmt: skip
    out = tmp_path / "out"
    for job in suite.jobs:
        (out / job.folder).mkdir(parents=True)
        (out / job.folder / "config.yaml").write_text(dump_config(job.config))  # started, no summary.json yet
    commands = {job.label.switches: job_command(job, suite, out) for job in suite.jobs}
    assert "--resume" not in commands["pooled"] and "--overwrite" in commands["pooled"]
    assert commands["federated"][-2:] == ["--resume", str(out / "synthetic/mlp/federated/seed0")]


def test_a_finished_job_whose_config_the_suite_changed_is_stale_and_runs_again(tmp_path: Path):
    """The suite file's `set` edited after a job finished: the job is not skipped as finished with the
    old config; it runs again with --overwrite. More rounds than the run did: it resumes to extend."""
    path = write(tmp_path, "name: t\nbase: base.yaml\nmethods: [fedavg]\n")
    suite, out = load_suite(path), tmp_path / "out"
    job = suite.jobs[0]
    (out / job.folder).mkdir(parents=True)
    (out / job.folder / "config.yaml").write_text(dump_config(job.config))
    (out / job.folder / "summary.json").write_text("{}")
    assert job_status(job, out) == "finished"
    path.write_text("name: t\nbase: base.yaml\nmethods: [fedavg]\nset: [train.lr=0.01]\n")
    changed = load_suite(path)
    assert job_status(changed.jobs[0], out) == "stale" and stale_keys(changed.jobs[0], out / job.folder) == [
        "train.lr"
    ]
    command = job_command(changed.jobs[0], changed, out)
    assert "--overwrite" in command and "--resume" not in command
    path.write_text("name: t\nbase: base.yaml\nmethods: [fedavg]\nset: [rounds=5]\n")
    assert job_status(load_suite(path).jobs[0], out) == "resume"
    # the TopkDropout settings only trade the final predictions: a finished run stays finished (2026-12-06: a
    # new portfolio default must not send every finished job of every suite back to round 1)
    path.write_text("name: t\nbase: base.yaml\nmethods: [fedavg]\nset: [portfolio.topk=7, portfolio.n_drop=2]\n")
    assert job_status(load_suite(path).jobs[0], out) == "finished"


def test_per_method_overrides_reach_only_that_methods_jobs(tmp_path: Path):
    path = write(tmp_path, """
name: ranks
methods: [fedweave, fedit]
per_method: {fedit: [adapter.rank=32]}
""")  # fmt: skip
    ranks = {j.label.method: j.config.adapter.rank for j in load_suite(path).jobs}
    assert ranks == {"fedweave": 8, "fedit": 32}
    path.write_text("name: ranks\nmethods: [fedit]\nper_method: {fedavg: [adapter.rank=32]}\n")
    with pytest.raises(ConfigError, match=r"per_method names \['fedavg'\], which are not in methods"):
        load_suite(path)


def header_table_command(text: str) -> tuple[list[str], str] | None:
    """The suites and the reference row of a suite file's `fedloom table runs/suites/… --reference ROW`
    header comment (continuation lines joined), or None where the header has none."""
    header = " ".join(line.lstrip("# ").rstrip("\\ ") for line in text.splitlines() if line.startswith("#"))
    found = re.search(r"fedloom table ((?:runs/suites/[\w.-]+\s+)+)--reference (\S+)", header)
    return (re.findall(r"runs/suites/([\w.-]+)", found.group(1)), found.group(2)) if found else None


def test_every_shipped_suite_resolves_every_job_and_its_table_command_names_a_row():
    suites = sorted((Path(__file__).parents[3] / "configs" / "suites").glob("*.yaml"))
    assert len(suites) >= 10
    rows: dict[str, set[str]] = {}
    for path in suites:
        suite = load_suite(path)
        assert suite.jobs, path
        assert suite.config.name == path.stem  # the default output folder is named after the file
        rows[path.stem] = {job.label.row for job in suite.jobs}
    for path in suites:  # the header's `fedloom table … --reference ROW` works as printed
        command = header_table_command(path.read_text())
        if command is not None:
            names, reference = command
            reference = reference.strip("'\"")
            named = set().union(*(rows[name] for name in names))
            if ROW_FIELD in reference:  # a template ('{row}-fixed'): it pairs at least one row with its twin
                assert partners({row: [] for row in named}, reference), (path.name, reference)
            else:
                assert reference in named, (path.name, reference)


def test_the_header_table_command_is_read_across_continuation_lines():
    text = "# x\n#   table:  fedloom table runs/suites/a runs/suites/b \\\n#  --reference fedavg/default\nname: a\n"
    assert header_table_command(text) == (["a", "b"], "fedavg/default")
    assert header_table_command("#   table:  fedloom table runs/suites/a\nname: a\n") is None


TABLE_3_ROWS = {"local", "fedavg", "fedprox", "scaffold", "ditto", "fedit", "ffa-lora", "flora", "flexlora",
                "feddpa", "fedsa-lora", "fedex-lora", "rpa"}  # fmt: skip  # seed 000 Table 3's federated rows


@pytest.mark.parametrize(
    "name", ["seed000-csi300-cpu", "seed000-fnspid-cpu", "seed000-acl18-cpu", "seed000-bigdata22-cpu"]
)
def test_a_headline_suite_runs_every_federated_row_of_the_seed_on_five_seeds_or_more(name: str):
    """Issue 43: seed 000's main tables (3 and 4) at >= 5 seeds, with every federated row the seed lists."""
    suite = load_suite(Path(__file__).parents[3] / "configs" / "suites" / f"{name}.yaml")
    assert len({job.label.seed for job in suite.jobs}) >= 5
    assert {job.label.method for job in suite.jobs} >= TABLE_3_ROWS
