"""A suite: one base config and a grid — methods × seeds × named switch sets × datasets — expanded into
jobs, each a `fedloom run` with its own run directory under the suite directory.

    name: acl18-ablations-cpu
    base: ../acl18.yaml                # relative to the suite file
    set: [rounds=5]                    # overrides shared by every job
    methods: [rpa]
    per_method: {}                     # method → overrides for its jobs only: {fedit: [adapter.rank=32]}
    seeds: [0, 1, 2]
    switches:                          # switch set name → overrides; `default: {}` is the plain run
      default: {}
      m1: {methods.rpa.prototypes: 1}
    row: "{switches}"                  # the table row of a job: {method}, {switches}, {dataset}

Every job's config is resolved when the suite is loaded, so a bad key fails before anything runs, and
a job whose resolved config equals an earlier one's is dropped (``methods: [local, rpa]`` with switch
sets that change only RPA runs Local-only once, in the first switch set's row).
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fedloom.errors import ConfigError
from fedloom.runs.config import RunConfig, load_config, read_yaml
from fedloom.runs.label import JobLabel

ROW_FIELDS = ("method", "switches", "dataset")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _plain_run() -> dict[str, dict[str, Any]]:
    return {"default": {}}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SuiteConfig(_Strict):
    """The grid of a suite."""

    name: str = Field(description="suite name (the default output folder is runs/suites/<name>)")
    base: Path | None = Field(None, description="base config file, relative to the suite file (None: defaults)")
    set: list[str] = Field(default_factory=list, description="key=value overrides shared by every job")
    methods: list[str] = Field(min_length=1, description="methods, one row each (per switch set)")
    per_method: dict[str, list[str]] = Field(
        default_factory=dict, description="method → key=value overrides for its jobs only (e.g. a baseline's rank)"
    )
    seeds: list[int] = Field([0], min_length=1, description="seeds; a table aggregates over them")
    datasets: list[str] | None = Field(None, description="datasets, one table each (None: the base config's)")
    switches: dict[str, dict[str, Any]] = Field(
        default_factory=_plain_run, min_length=1, description="switch set name → {key: value}"
    )
    row: str = Field("{method}/{switches}", description="row name template over {method}, {switches}, {dataset}")

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"{v!r} must be letters, digits, '_', '.' or '-'")
        return v

    @field_validator("switches")
    @classmethod
    def _plain_switch_names(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        bad = [k for k in v if not NAME.match(k)]
        if bad:
            raise ValueError(f"switch set names {bad} must be letters, digits, '_', '.' or '-'")
        return v

    @model_validator(mode="after")
    def _per_method_names_a_method(self) -> SuiteConfig:
        unknown = sorted(set(self.per_method) - set(self.methods))
        if unknown:
            raise ValueError(f"per_method names {unknown}, which are not in methods")
        return self

    @field_validator("row")
    @classmethod
    def _known_fields(cls, v: str) -> str:
        used = {f for _, f, _, _ in string.Formatter().parse(v) if f is not None}
        unknown = used - set(ROW_FIELDS)
        if unknown:
            raise ValueError(f"unknown field(s) {sorted(unknown)} in {v!r}; use {', '.join(ROW_FIELDS)}")
        return v


@dataclass(frozen=True)
class Job:
    """One `fedloom run` of a suite: its grid label, its overrides and its resolved config."""

    label: JobLabel
    overrides: tuple[str, ...]
    config: RunConfig

    @property
    def folder(self) -> str:
        """The run directory under the suite directory: ``<dataset>/<method>/<switches>/seed<k>``."""
        return f"{self.label.dataset}/{self.label.method}/{self.label.switches}/seed{self.label.seed}"


@dataclass(frozen=True)
class Suite:
    config: SuiteConfig
    base: Path | None  # absolute
    jobs: list[Job]


def read_suite(path: Path) -> SuiteConfig:
    """Parse and validate a suite file; every problem is reported at once, by key."""
    if not path.is_file():
        raise ConfigError(f"suite file {path} does not exist")
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a suite is a mapping of keys (name, base, methods, ...)")
    try:
        return SuiteConfig.model_validate(raw)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(map(str, e['loc'])) or '(top level)'}: "
            + ("no such suite key" if e["type"] == "extra_forbidden" else e["msg"].removeprefix("Value error, "))
            for e in exc.errors()
        ]
        raise ConfigError(f"{path}: invalid suite: " + "; ".join(problems)) from None


def load_suite(path: Path, extra_overrides: list[str] | None = None) -> Suite:
    """The suite's jobs in grid order (dataset, method, switch set, seed), every config resolved."""
    cfg = read_suite(path)
    base = (path.parent / cfg.base).resolve() if cfg.base is not None else None
    datasets = cfg.datasets or [load_config(base, None, [*cfg.set, *(extra_overrides or [])]).dataset]
    jobs, problems = [], []
    for dataset in datasets:
        for method in cfg.methods:
            for switch, values in cfg.switches.items():
                own = cfg.per_method.get(method, [])
                overrides = (*cfg.set, *own, *switch_overrides(values), *(extra_overrides or []))
                row = cfg.row.format(method=method, switches=switch, dataset=dataset)
                for seed in cfg.seeds:
                    try:
                        config = load_config(
                            base, {"method": method, "dataset": dataset, "seed": seed}, list(overrides)
                        )
                    except ConfigError as exc:
                        problems.append(f"job {dataset}/{method}/{switch}/seed{seed}: {exc}")
                        continue
                    label = JobLabel(suite=cfg.name, row=row, method=method, switches=switch, dataset=dataset,
                                     seed=seed)  # fmt: skip
                    jobs.append(Job(label, overrides, config))
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems))
    jobs = distinct(jobs)
    _check_rows(path, cfg, jobs)
    return Suite(cfg, base, jobs)


def select_jobs(suite: Suite, patterns: list[str]) -> Suite:
    """The suite cut to the jobs whose folder (``<dataset>/<method>/<switches>/seed<k>``) matches one of the
    shell patterns, e.g. ``synthetic/rpa/paper/*``; a pattern that matches no job is an error (a typo would
    otherwise run nothing, or everything)."""
    if not patterns:
        return suite
    unmatched = [p for p in patterns if not any(fnmatchcase(job.folder, p) for job in suite.jobs)]
    if unmatched:
        raise ConfigError(
            f"--only {', '.join(unmatched)} matches no job of suite {suite.config.name} "
            f"(jobs look like {suite.jobs[0].folder})"
        )
    return replace(suite, jobs=[job for job in suite.jobs if any(fnmatchcase(job.folder, p) for p in patterns)])


def distinct(jobs: list[Job]) -> list[Job]:
    """Jobs whose resolved configs differ, the first in grid order kept: a switch set that only sets another
    method's keys (``methods.rpa.*`` for ``local``) would rerun that method's plain job."""
    seen: set[str] = set()
    kept = []
    for job in jobs:
        resolved = job.config.model_dump(mode="json")
        resolved["methods"] = resolved["methods"].get(job.config.method)  # a method reads only its own section
        key = json.dumps(resolved, sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept.append(job)
    return kept


def switch_overrides(values: dict[str, Any]) -> list[str]:
    """``{methods.rpa.prototypes: 1}`` → ``["methods.rpa.prototypes=1"]`` (values as JSON, which YAML reads back)."""
    return [f"{key}={json.dumps(value)}" for key, value in values.items()]


def _check_rows(path: Path, cfg: SuiteConfig, jobs: list[Job]) -> None:
    """Two grid points of one dataset and seed must not share a row name."""
    seen: dict[tuple[str, int, str], Job] = {}
    for job in jobs:
        key = (job.label.dataset, job.label.seed, job.label.row)
        if key in seen:
            other = seen[key].label
            raise ConfigError(
                f"{path}: row template {cfg.row!r} names two jobs {job.label.row!r} "
                f"({other.method}/{other.switches} and {job.label.method}/{job.label.switches}); "
                "add {method} or {switches} to `row`"
            )
        seen[key] = job
