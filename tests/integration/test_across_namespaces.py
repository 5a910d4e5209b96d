"""README's deployment as a new operator runs it, across two network namespaces (two machines as far
as the network is concerned): the coordinator keeps its SuperLink on loopback, with a database, behind
the fleet gateway, and launches only the approved app; three owners' SuperNodes in another namespace
dial the gateway's address and launch only the approved app too. From the owners' side the Control
API cannot be reached. The SuperLink is then killed after round 2 and restarted on its database: the
nodes wait for it and are still registered, and `resume=true` finishes the run as the in-process one.

Without root (network namespaces) the owners run on this machine and dial its public address."""

from __future__ import annotations

import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from fedloom.runs.config import dump_config
from fedloom.runtime.flower.approval import app_hash
from tests.conftest import small_config
from tests.integration.cluster import APP, BIN, Cluster, free_port, public_address
from tests.integration.flower_check import assert_same_run

pytestmark = pytest.mark.integration

TAG = os.getpid() % 250
NS, LINK, PEER = f"fedloom{TAG}", f"flc{TAG}", f"fln{TAG}"
COORDINATOR, OWNER = f"10.231.{TAG}.1", f"10.231.{TAG}.2"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass(frozen=True)
class Owners:
    """How the owners' side is reached: a command prefix that runs there, and the coordinator's address."""

    prefix: tuple[str, ...]
    coordinator: str

    def python(self, code: str) -> str:
        """Run a Python snippet on the owners' side; its stdout."""
        out = subprocess.run([*self.prefix, str(BIN / "python"), "-c", code],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()


@pytest.fixture
def owners():
    """A network namespace joined to this one by a veth pair (COORDINATOR here, OWNER there); without
    root or namespaces the owners share this machine and dial its public address instead."""
    try:
        if os.geteuid() != 0:
            raise PermissionError("network namespaces need root")
        _ip("netns", "add", NS)
    except (OSError, subprocess.CalledProcessError) as err:
        warnings.warn(f"owners on this machine's own network (no namespace: {err})", stacklevel=1)
        yield Owners((), public_address())
        return
    try:
        _ip("link", "add", LINK, "type", "veth", "peer", "name", PEER)
        _ip("link", "set", PEER, "netns", NS)
        _ip("addr", "add", f"{COORDINATOR}/30", "dev", LINK)
        _ip("link", "set", LINK, "up")
        for args in (
            ["addr", "add", f"{OWNER}/30", "dev", PEER],
            ["link", "set", PEER, "up"],
            ["link", "set", "lo", "up"],
        ):
            _ip("-n", NS, *args)
        yield Owners(("ip", "netns", "exec", NS), COORDINATOR)
    finally:
        subprocess.run(["ip", "link", "del", LINK], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True, timeout=30)


def test_readme_deployment_across_namespaces_with_a_superlink_restart(owners, tmp_path):
    c = Cluster(tmp_path / "deploy", 3)
    approved = app_hash(APP)
    gateway = f"{owners.coordinator}:{free_port()}"
    database = ["--database", str(c.root / "superlink.db")]
    superlink = [str(BIN / "flower-superlink"), "--insecure", "--disable-runtime-dependency-installation",
                 "--port", str(c.port), *database, "--isolation", "process"]  # fmt: skip
    superexec = [str(BIN / "fedloom"), "superexec", "--insecure", "--approved-app", approved, "--runtime-api-address"]

    def start_coordinator() -> None:
        c._start("superlink", superlink)
        c.wait_for_superlink()  # up before anything dials it
        c._start("superexec", [*superexec, f"127.0.0.1:{c.port}"])
        c._start("gateway", [str(BIN / "fedloom"), "fleet-gateway", "--listen", gateway,
                             "--superlink", f"http://127.0.0.1:{c.port}"])  # fmt: skip

    full = small_config(**{"rounds": 3, "federation.fraction": 0.67})

    def on_flower(ws, out: Path) -> None:
        start_coordinator()
        for i in range(3):  # each owner: node worker, SuperNode and approved-app SuperExec, in the owners' namespace
            api, sock = str(free_port()), c.root / f"worker{i}.sock"
            c._start(f"worker{i}", [*owners.prefix, str(BIN / "fedloom"), "node-worker", "--socket", str(sock)])
            config = f"partition-id={i} state-dir='{c.root / f'state{i}'}' worker='{sock}'"
            c._start(f"node{i}", [*owners.prefix, str(BIN / "flower-supernode"), "--insecure",
                                  "--superlink", gateway, "--isolation", "process", "--port", api,
                                  "--node-config", config])  # fmt: skip
            c._start(f"exec{i}", [*owners.prefix, *superexec, f"127.0.0.1:{api}"])
        c.wait_for_nodes(3)
        c.wait_for_workers([c.root / f"worker{i}.sock" for i in range(3)])
        probe = (
            "import httpx, socket\n"
            f"print(socket.socket().connect_ex(('{owners.coordinator}', {c.port})) != 0,"
            f" httpx.post('http://{gateway}/v1/control/start-run', content=b'').status_code)"
        )
        unreachable, status = owners.python(probe).split()
        assert status == "403"  # the gateway refuses the Control API ...
        assert unreachable == "True" or owners.coordinator == "127.0.0.1"  # ... and the SuperLink is not there

        cfg_path = tmp_path / "run.yaml"
        cfg_path.write_text(dump_config(full))
        c.flwr_run(cfg_path, out, "overrides='rounds=2'")
        (out / "summary.json").unlink()
        for name in ("gateway", "superexec", "superlink"):  # the coordinator machine goes down ...
            c.kill(name)
        start_coordinator()  # ... and comes back on its database; the nodes were never restarted
        c.flwr_run(cfg_path, out, "resume=true")
        assert all(c.procs[f"node{i}"].poll() is None for i in range(3))

    try:
        assert_same_run(full, tmp_path, on_flower)
    finally:
        c.stop()
