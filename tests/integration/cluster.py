"""A local Flower deployment on 127.0.0.1 for tests and benchmarks: one SuperLink, SuperNodes and
optional node workers as separate process groups, the fedloom Flower app submitted with ``flwr run``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

APP = Path(__file__).resolve().parents[2] / "deploy" / "flower"
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition: Callable[[], bool], what: Callable[[], str] | str, timeout: float = 120) -> None:
    """Poll ``condition`` until it holds; fail with ``what`` (or what it returns) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.2)


def public_address() -> str:
    """This machine's address on its default route (what another machine would dial), else 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # UDP: picks the outgoing interface, sends nothing
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


class Cluster:
    """SuperLink + ``nodes`` SuperNodes (node i is partition i) as process groups; the nodes listed in
    ``workers`` relay to a `fedloom node-worker` of their own, or all to one if ``shared_worker``.
    As README's deployment: the SuperLink listens on loopback only and the nodes dial a `fedloom
    fleet-gateway` on this machine's public address. `stop` kills every process they started."""

    def __init__(self, root: Path, nodes: int, workers: tuple[int, ...] = (), shared_worker: bool = False) -> None:
        self.root, self.nodes, self.workers, self.shared_worker = root, nodes, workers, shared_worker
        self.home = root / "flwr-home"
        self.home.mkdir(parents=True)
        self.port, self.gateway = free_port(), f"{public_address()}:{free_port()}"
        connection = f'[superlink.local]\naddress = "127.0.0.1:{self.port}"\ninsecure = true\n'
        (self.home / "config.toml").write_text(f'[superlink]\ndefault = "local"\n\n{connection}')
        # The SuperLink and SuperNodes spawn flower-superexec / flwr-clientapp from PATH: put this venv first
        # (CI runs `.venv/bin/python -m pytest` without activating the venv).
        path = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
        self.env = {**os.environ, "FLWR_HOME": str(self.home), "PATH": path}
        self.procs: dict[str, subprocess.Popen] = {}
        self.spawned: set[int] = set()

    def _start(self, name: str, args: list[str]) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen(args, env=self.env, stdout=log, stderr=log, start_new_session=True)

    def start(self) -> None:
        self._start("superlink", [str(BIN / "flower-superlink"), "--insecure", "--port", str(self.port),
                                  "--disable-runtime-dependency-installation"])  # fmt: skip
        self._start("gateway", [str(BIN / "fedloom"), "fleet-gateway", "--listen", self.gateway,
                                "--superlink", f"http://127.0.0.1:{self.port}"])  # fmt: skip
        for path in {self.socket(i) for i in self.workers}:
            self._start(path.stem, [str(BIN / "fedloom"), "node-worker", "--socket", str(path)])
        for i in range(self.nodes):
            self.start_node(i)
        self.wait_for_nodes(self.nodes)
        self.wait_for_workers([self.socket(i) for i in self.workers])

    def socket(self, i: int) -> Path:
        return self.root / ("worker.sock" if self.shared_worker else f"worker{i}.sock")

    def wait_for_nodes(self, count: int, timeout: float = 120) -> None:
        """Until the SuperLink has activated ``count`` SuperNodes since it started."""
        log = self.root / "superlink.log"
        wait_until(lambda: log.read_text(errors="replace").count("Activated node_id") >= count,
                   lambda: f"SuperNodes did not connect:\n{log.read_text()[-2000:]}", timeout)  # fmt: skip

    def wait_for_workers(self, sockets: list[Path], timeout: float = 120) -> None:
        """Until every node worker listens on its socket."""
        wait_until(lambda: all(path.is_socket() for path in sockets), "node workers did not start", timeout)

    def wait_for_superlink(self, timeout: float = 120) -> None:
        """Until the SuperLink accepts connections on its (loopback) port."""
        wait_until(lambda: socket.socket().connect_ex(("127.0.0.1", self.port)) == 0,
                   lambda: (self.root / "superlink.log").read_text()[-2000:], timeout)  # fmt: skip

    def start_node(self, i: int) -> None:
        config = f"partition-id={i} state-dir='{self.root / f'state{i}'}'"
        if i in self.workers:
            config += f" worker='{self.socket(i)}'"
        self._start(f"node{i}", [str(BIN / "flower-supernode"), "--insecure", "--superlink", self.gateway,
                                 "--port", str(free_port()), "--node-config", config])  # fmt: skip

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        self._remember(proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def _remember(self, proc: subprocess.Popen) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            self.spawned |= {p.pid for p in psutil.Process(proc.pid).children(recursive=True)} | {proc.pid}

    def flwr_run(self, cfg_path: Path, out: Path, extra: str = "", wait: bool = True) -> subprocess.Popen:
        run_config = f"config='{cfg_path}' out='{out}' num-nodes={self.nodes} {extra}".strip()
        proc = subprocess.Popen([str(BIN / "flwr"), "run", str(APP), "local", "--stream", "-c", run_config],
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        if wait:
            output, _ = proc.communicate(timeout=600)
            assert (out / "summary.json").is_file(), output.decode()[-3000:]
        return proc

    def stop(self) -> None:
        for proc in self.procs.values():
            self._remember(proc)
        for name in list(self.procs):
            self.kill(name)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in self.spawned):
            time.sleep(0.2)
