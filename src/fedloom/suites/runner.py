"""Run a suite's jobs as `fedloom run` subprocesses, N at a time, each pinned to its share of the cores.

A job whose run directory has summary.json is finished and skipped; one with a config.yaml there
(started, interrupted) continues with ``fedloom run --resume``; one whose config.yaml differs from the
job's (the suite file edited since) is stale and runs again with ``--overwrite``; a job that fails is recorded in
``SUITE_DIR/suite.jsonl`` (its output in ``SUITE_DIR/logs/``) and the others go on. Ctrl-C stops
the running jobs (their checkpoints stay) so the same command continues later. Job times measured
here estimate what is left (``--dry-run``, the ETA). Before the workers start, each distinct
workspace of the unfinished jobs is prepared once on every core (`fedloom prepare`), so no worker
builds a shared cache on its share of the cores while the others wait for it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from fedloom.errors import FedloomError
from fedloom.paths import atomic_write
from fedloom.runs.config import RESUMABLE_KEYS, changed_keys, dump_config, load_config
from fedloom.runs.kinds import kind_of
from fedloom.runs.label import JOB_FILE
from fedloom.suites.spec import Job, Suite

Status = Literal["finished", "resume", "new", "stale"]
EVENTS = "suite.jsonl"
INTERRUPTED = (130, -signal.SIGINT, -signal.SIGTERM)  # a job stopped by Ctrl-C, not a failure
STOP_GRACE = 60.0  # seconds a stopped job gets to exit before it is killed


def job_status(job: Job, suite_dir: Path) -> Status:
    """finished (summary.json, same config), resume (a started run with rounds, or a finished one whose
    ``rounds`` the suite extended), new, or stale: the run's config differs from the job's in a key a
    resume may not change (the suite file's ``set`` edited since), so it is run again from scratch. A
    reference fitted in one pass that was stopped starts over."""
    folder = suite_dir / job.folder
    if not (folder / "config.yaml").is_file():
        return "new"
    if stale_keys(job, folder):
        return "stale"
    cfg = job.config
    rounds = kind_of(cfg).rounds
    done = load_config(folder / "config.yaml").rounds
    if rounds and done > cfg.rounds:
        return "stale"
    if (folder / "summary.json").is_file() and (not rounds or done == cfg.rounds):
        return "finished"
    return "resume" if rounds else "new"


def stale_keys(job: Job, folder: Path) -> list[str]:
    """The keys in which the run in ``folder`` differs from ``job``'s config, other than those a resume
    may change (`RESUMABLE_KEYS`); every key when its config.yaml no longer loads."""
    try:
        saved = load_config(folder / "config.yaml")
    except FedloomError:
        return ["config.yaml"]
    return [k for k in changed_keys(saved, job.config) if k not in RESUMABLE_KEYS]


def job_command(job: Job, suite: Suite, suite_dir: Path, extra: Sequence[str] = ()) -> list[str]:
    """``fedloom run`` for a job: ``--resume`` when its run directory holds a started run; ``extra``
    arguments go to every job (e.g. ``--track mlflow``)."""
    out = suite_dir / job.folder
    cli = [sys.executable, "-m", "fedloom.cli", "run", *extra]
    if job_status(job, suite_dir) == "resume":
        return [*cli, "--resume", str(out)]
    label = job.label
    base = ["--config", str(suite.base)] if suite.base is not None else []
    flags = ["--method", label.method, "--dataset", label.dataset, "--seed", str(label.seed), "--out", str(out)]
    if (out / "config.yaml").is_file():  # stale, or a stopped one-pass reference: replaced
        flags.append("--overwrite")
    return [*cli, *base, *flags, *(arg for o in job.overrides for arg in ("--set", o))]


def workspaces(jobs: Sequence[Job]) -> list[Job]:
    """The first job of each distinct workspace among ``jobs``: what the frozen caches depend on (model,
    data, and the adapted layers, below which the prefix is cached); structured references build none."""
    seen: dict[str, Job] = {}
    for job in jobs:
        if kind_of(job.config).backbone:
            c = job.config.model_dump(mode="json")
            key = [c["backbone"], c["model"], c["dataset"], c["data"], c["adapter"]["layers"]]
            seen.setdefault(json.dumps(key, sort_keys=True), job)
    return list(seen.values())


def cpu_shares(cpus: Sequence[int], workers: int) -> list[list[int]]:
    """Disjoint core sets, one per worker (round robin when workers outnumber cores): 4 cores, 2 → [[0, 1], [2, 3]]."""
    if workers >= len(cpus):
        return [[cpus[i % len(cpus)]] for i in range(workers)]
    size = len(cpus) // workers
    return [list(cpus[i * size : (i + 1) * size]) for i in range(workers)]


def measured_seconds(suite_dir: Path) -> dict[str, float]:
    """Wall seconds of every job finished here, by job folder (latest run)."""
    path = suite_dir / EVENTS
    if not path.is_file():
        return {}
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {e["job"]: e["seconds"] for e in events if e["status"] == "finished"}


def estimate(job: Job, times: dict[str, float], jobs: Sequence[Job]) -> float | None:
    """Expected seconds of a job: its own measured time, else the mean of measured jobs of the same
    method and dataset, else of all measured jobs; None before any job was measured."""
    if job.folder in times:
        return times[job.folder]
    same = [times[j.folder] for j in jobs if j.folder in times and
            (j.label.method, j.label.dataset) == (job.label.method, job.label.dataset)]  # fmt: skip
    pool = same or list(times.values())
    return sum(pool) / len(pool) if pool else None


@dataclass
class Running:
    job: Job
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float
    cpus: list[int]


@dataclass
class SuiteState:
    """What the progress display shows; updated as jobs start and end."""

    total: int
    workers: int
    finished: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    running: dict[str, float] = field(default_factory=dict)  # job folder → start time
    pending: list[Job] = field(default_factory=list)
    estimates: dict[str, float | None] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return self.finished + self.skipped

    def eta(self, now: float) -> float | None:
        """Seconds left: the estimated work left (pending jobs, running jobs' remainder) over the workers."""
        left = [self.estimates.get(j.folder) for j in self.pending]
        left += [max(0.0, (self.estimates.get(k) or 0.0) - (now - t0)) for k, t0 in self.running.items()]
        if any(v is None for v in left):
            return None
        return sum(v for v in left if v is not None) / self.workers


Event = Literal["preparing", "prepared", "started", "finished", "failed", "skipped", "interrupted"]


class SuiteRunner:
    """Runs a suite's unfinished jobs with ``workers`` subprocesses; ``on_event`` hears each job start
    and end, ``on_tick`` the state about every ``poll`` seconds."""

    def __init__(
        self,
        suite: Suite,
        suite_dir: Path,
        workers: int,
        on_event: Callable[[Event, Job, SuiteState, str], None] | None = None,
        on_tick: Callable[[SuiteState], None] | None = None,
        poll: float = 0.5,
        job_args: Sequence[str] = (),
    ) -> None:
        self.suite, self.suite_dir, self.workers, self.poll = suite, suite_dir, workers, poll
        self.job_args = tuple(job_args)
        self.on_event = on_event or (lambda *_: None)
        self.on_tick = on_tick or (lambda _: None)
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        self.shares = cpu_shares(list(cpus), workers)

    def run(self) -> SuiteState:
        """Every job to the end (finished or failed); raises KeyboardInterrupt after stopping the jobs."""
        jobs = self.suite.jobs
        times = measured_seconds(self.suite_dir)
        state = SuiteState(len(jobs), self.workers, estimates={j.folder: estimate(j, times, jobs) for j in jobs})
        (self.suite_dir / "logs").mkdir(parents=True, exist_ok=True)
        for job in jobs:
            if job_status(job, self.suite_dir) == "finished":
                state.skipped += 1
                self.on_event("skipped", job, state, "")
            else:
                state.pending.append(job)
        for job in workspaces(state.pending):
            self._prepare(job, state)
        running: list[Running] = []
        try:
            while state.pending or running:
                free = [s for s in self.shares if all(s is not r.cpus for r in running)]
                while state.pending and free:
                    running.append(self._start(state.pending.pop(0), free.pop(0), state))
                for r in [r for r in running if r.process.poll() is not None]:
                    running.remove(r)
                    self._end(r, state)
                self.on_tick(state)
                time.sleep(self.poll)
        except KeyboardInterrupt:
            self._stop(running, state)
            raise
        return state

    def _prepare(self, job: Job, state: SuiteState) -> None:
        """`fedloom prepare` of ``job``'s config on every core of the suite; a failure is reported and
        left to the jobs, which build what they need themselves (and fail on their own if they must)."""
        cpus = sorted({c for share in self.shares for c in share})
        config = self.suite_dir / "logs" / f"prepare-{job.folder.replace('/', '__')}.yaml"
        atomic_write(config, dump_config(job.config))
        threads = str(len(cpus))
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        self.on_event("preparing", job, state, "its workspace's caches, on every core")
        t0 = time.monotonic()
        with config.with_suffix(".log").open("ab") as log:
            process = subprocess.Popen([sys.executable, "-m", "fedloom.cli", "prepare", "--config", str(config)],
                                       stdout=log, stderr=subprocess.STDOUT, env=env)  # fmt: skip
            try:
                code = process.wait()
            except KeyboardInterrupt:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=STOP_GRACE)
                raise
        seconds = time.monotonic() - t0
        detail = f"{seconds:.0f} s" if code == 0 else f"did not finish (exit {code}; {config.with_suffix('.log')})"
        self.on_event("prepared", job, state, detail)

    def _start(self, job: Job, cpus: list[int], state: SuiteState) -> Running:
        folder = self.suite_dir / job.folder
        folder.mkdir(parents=True, exist_ok=True)
        stale = stale_keys(job, folder) if (folder / "config.yaml").is_file() else []
        atomic_write(folder / JOB_FILE, job.label.model_dump_json(indent=2))
        command = job_command(job, self.suite, self.suite_dir, self.job_args)
        threads = str(len(cpus))
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        log = self.log_path(job).open("ab")
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        if hasattr(os, "sched_setaffinity"):  # Linux; set before the child starts a thread (threads inherit it)
            os.sched_setaffinity(process.pid, cpus)
        state.running[job.folder] = time.monotonic()
        self.on_event("started", job, state, f"(again: its config differs in {', '.join(stale)})" if stale else "")
        return Running(job, process, log, time.monotonic(), cpus)

    def _end(self, r: Running, state: SuiteState) -> None:
        r.log.close()
        seconds = time.monotonic() - r.started
        state.running.pop(r.job.folder, None)
        code = r.process.returncode
        if code == 0:
            state.finished += 1
            self._record(r.job, "finished", seconds, code, "")
            self.on_event("finished", r.job, state, f"{seconds:.0f} s")
            return
        if code in INTERRUPTED:
            self._record(r.job, "interrupted", seconds, code, "")
            self.on_event("interrupted", r.job, state, "")
            return
        error = self._error(r.job)
        state.failed.append(r.job.folder)
        self._record(r.job, "failed", seconds, code, error)
        self.on_event("failed", r.job, state, error)

    def _stop(self, running: list[Running], state: SuiteState) -> None:
        """Ctrl-C: interrupt every running job (it exits between rounds' checkpoints), then wait."""
        for r in running:
            if r.process.poll() is None:
                r.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_GRACE
        for r in running:
            try:
                r.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                r.process.kill()
                r.process.wait()
            r.log.close()
            state.running.pop(r.job.folder, None)
            self._record(r.job, "interrupted", time.monotonic() - r.started, r.process.returncode, "")

    def log_path(self, job: Job) -> Path:
        return self.suite_dir / "logs" / f"{job.folder.replace('/', '__')}.log"

    def _error(self, job: Job) -> str:
        """The last non-empty line of a failed job's output (its one-line error, or a traceback's end)."""
        lines = [ln for ln in self.log_path(job).read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1].strip() if lines else "no output"

    def _record(self, job: Job, status: str, seconds: float, code: int | None, error: str) -> None:
        event = {"job": job.folder, "row": job.label.row, "status": status, "seconds": round(seconds, 1),
                 "returncode": code, "error": error, "log": str(self.log_path(job)), "time": time.time()}  # fmt: skip
        with (self.suite_dir / EVENTS).open("a") as f:
            f.write(json.dumps(event) + "\n")
