"""Run only the app the owner approved: Flower's SuperExec with a check of the submitted app's hash.

Whoever can submit a run (``flwr run``) chooses the app, and an app's ``[tool.flwr.app.components]``
may point at its own module: that code would run in the ServerApp on the coordinator and in the
ClientApp on every SuperNode, next to the owners' data. Flower 1.42's own remedy (``--trusted-entities``)
needs FABs signed by a Flower platform SuperLink. Here each machine pins the sha256 of the app bundle
(FAB) it approved, ``fedloom app-hash deploy/flower``, and launches app processes through
``fedloom superexec --approved-app HASH`` with ``--isolation process`` on its SuperNode / SuperLink:
a task of any other app is refused before any of its code is installed or imported.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from fedloom.errors import ConfigError

log = logging.getLogger(__name__)

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def app_hash(app_dir: Path) -> str:
    """The sha256 of the FAB that ``flwr run APP_DIR`` submits (Flower builds it deterministically)."""
    from flwr.cli.build import build_fab_from_disk

    if not (app_dir / "pyproject.toml").is_file():
        raise ConfigError(f"{app_dir} is not a Flower app (no pyproject.toml)")
    return hashlib.sha256(build_fab_from_disk(app_dir)).hexdigest()


def parse_approved(values: Iterable[str]) -> frozenset[str]:
    """Approved app hashes from the command line: hex digests, or files holding one per line (# comments)."""
    approved: set[str] = set()
    for value in values:
        path = Path(value)
        lines = path.read_text().splitlines() if path.is_file() else [value]
        for line in lines:
            digest = line.split("#", 1)[0].strip().lower()
            if not digest:
                continue
            if not _SHA256.match(digest):
                raise ConfigError(f"--approved-app: {digest!r} is neither a sha256 hex digest nor a file")
            approved.add(digest)
    if not approved:
        raise ConfigError("--approved-app: give at least one app hash (fedloom app-hash APP_DIR prints it)")
    return frozenset(approved)


def is_approved(fab_hash: str | None, approved: frozenset[str]) -> bool:
    """A task runs only when it names its app and that app's hash is approved (fail closed)."""
    return bool(fab_hash) and fab_hash in approved


def run_approved_superexec(
    runtime_api_address: str, approved: frozenset[str], insecure: bool, root_certificates: Path | None
) -> None:
    """Flower's SuperExec loop, launching a task only when its app is approved (blocks until killed)."""
    from flwr.supercore.superexec import run_superexec as loop
    from flwr.supercore.superexec.executor import LaunchResult
    from flwr.supercore.superexec.plugin import AutoExecPlugin

    refused: set[int] = set()  # Flower offers a refused task again at every poll until it expires: log it once

    class ApprovedAppPlugin(AutoExecPlugin):
        def launch_task(self, token, task):  # noqa: ANN001
            fab_hash = getattr(task, "fab_hash", None)
            if not is_approved(fab_hash, approved):
                if task.task_id not in refused:
                    refused.add(task.task_id)
                    log.error("refused task %s: app %s is not approved on this machine", task.task_id, fab_hash)
                return LaunchResult.failed(f"app {fab_hash or '?'} is not approved on this machine")
            return super().launch_task(token, task)

    # run_superexec builds its plugin from this module-level name; the loop itself stays Flower's
    loop.AutoExecPlugin = ApprovedAppPlugin  # type: ignore[misc]
    loop.run_superexec(
        runtime_api_address=runtime_api_address,
        insecure=insecure,
        root_certificates_path=str(root_certificates) if root_certificates else None,
        runtime_dependency_install=False,
    )


def supernode_commands(flower_args: Sequence[str], approved: frozenset[str] | None) -> list[list[str]]:
    """A data owner's node in two processes: ``flower-supernode`` with ``flower_args`` and process
    isolation (it launches no app itself), and the approved SuperExec on its Runtime API, which does.
    ``approved`` None: flower-supernode alone, launching whatever is submitted (a trial)."""
    if approved is None:
        return [[_beside_python("flower-supernode"), *flower_args]]
    for option in ("--isolation", "--ssl-certfile", "--ssl-keyfile"):
        if any(a == option or a.startswith(f"{option}=") for a in flower_args):
            raise ConfigError(f"fedloom supernode sets the node's Runtime API itself (loopback, process "
                              f"isolation): drop {option}, or start flower-supernode and fedloom superexec "
                              "separately")  # fmt: skip
    host, port = _option(flower_args, "--host", "127.0.0.1"), _option(flower_args, "--port", "9094")
    node = [_beside_python("flower-supernode"), *flower_args, "--isolation", "process"]
    gate = [sys.executable, "-m", "fedloom.cli", "superexec", "--runtime-api-address", f"{host}:{port}", "--insecure"]
    return [node, gate + [arg for digest in sorted(approved) for arg in ("--approved-app", digest)]]


def supervise(commands: Sequence[Sequence[str]]) -> int:
    """Start every command, wait until one ends, stop the others; the first one's exit status."""
    procs = [subprocess.Popen(list(cmd)) for cmd in commands]
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        return next(p.returncode for p in procs if p.returncode is not None)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def _option(args: Sequence[str], name: str, default: str) -> str:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return default


def _beside_python(name: str) -> str:
    """A console script of this environment (where `flwr` put it), else from PATH."""
    local = Path(sys.executable).with_name(name)
    return str(local) if local.is_file() else (shutil.which(name) or name)
