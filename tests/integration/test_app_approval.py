"""A SuperNode that launches apps through `fedloom superexec --approved-app` runs only the app its owner
approved: a submitted app whose components point at its own module (here one that leaves a mark when
its ClientApp runs) is refused before any of its code runs on the node, and runs once approved."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from fedloom.runtime.flower.approval import app_hash
from tests.integration.cluster import APP, BIN, Cluster, free_port, wait_until

pytestmark = pytest.mark.integration

EVIL = """
from pathlib import Path

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

MARKS = Path({marks!r})
client_app = ClientApp()
server_app = ServerApp()


@client_app.query()
def query(msg: Message, context: Context) -> Message:
    (MARKS / f"client-{{context.run_id}}").write_text("the submitted code ran on the node")
    return Message(RecordDict(), reply_to=msg)


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    nodes = list(grid.get_node_ids())
    msgs = [Message(RecordDict(), dst_node_id=n, message_type="query") for n in nodes]
    list(grid.send_and_receive(msgs, timeout=600))
    (MARKS / f"server-{{context.run_id}}").write_text(str(len(nodes)))
"""


def _tampered_app(root: Path, marks: Path) -> Path:
    """The fedloom app with its components pointed at a module of its own."""
    app = root / "tampered"
    app.mkdir()
    toml = (APP / "pyproject.toml").read_text()
    toml = toml.replace("fedloom.apps.serverapp:server_app", "evil:server_app")
    (app / "pyproject.toml").write_text(toml.replace("fedloom.apps.clientapp:client_app", "evil:client_app"))
    (app / "evil.py").write_text(EVIL.format(marks=str(marks)))
    return app


def test_a_tampered_app_is_refused_on_the_node_and_runs_once_approved(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    tampered = _tampered_app(tmp_path, marks)
    genuine_hash, tampered_hash = app_hash(APP), app_hash(tampered)
    assert genuine_hash != tampered_hash
    c = Cluster(tmp_path / "cluster", 0)
    node_api = f"127.0.0.1:{free_port()}"
    try:
        c.start()  # the coordinator runs whatever is submitted: only the node protects itself here
        c._start("node0", [str(BIN / "flower-supernode"), "--insecure", "--superlink", c.gateway,
                           "--isolation", "process", "--port", node_api.split(":")[1],
                           "--node-config", "partition-id=0"])  # fmt: skip
        c.wait_for_nodes(1)

        def gate(approved: str, name: str) -> Path:
            c._start(name, [str(BIN / "fedloom"), "superexec", "--runtime-api-address", node_api, "--insecure",
                            "--approved-app", approved])  # fmt: skip
            return c.root / f"{name}.log"

        log = gate(genuine_hash, "gate-genuine")  # the owner approved the fedloom app only
        out = subprocess.run([str(BIN / "flwr"), "run", str(tampered), "local"], env=c.env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        wait_until(lambda: "is not approved" in log.read_text(), "the node did not refuse the tampered app", 300)
        assert tampered_hash in log.read_text()  # the hash Flower computed is the one fedloom app-hash prints
        assert not list(marks.iterdir())  # its ClientApp never ran (and the ServerApp still waits for it)

        c.kill("gate-genuine")  # the control: the owner approves that app, and the waiting task now runs
        gate(tampered_hash, "gate-tampered")
        wait_until(lambda: any(p.name.startswith("server-") for p in marks.iterdir()), "the round did not finish", 300)
        assert [p.name.split("-")[0] for p in sorted(marks.iterdir())] == ["client", "server"]
    finally:
        c.stop()


def test_the_owners_one_command_node_runs_flower_isolated_beside_the_approved_superexec(tmp_path):
    """`fedloom supernode --approved-app H ARGS`: flower-supernode ARGS --isolation process, and the
    approved SuperExec on its Runtime API; a SIGTERM stops both. Without approval it does not start."""
    port, digest = free_port(), "ab" * 32
    args = [
        "--insecure",
        "--superlink",
        f"127.0.0.1:{free_port()}",
        "--port",
        str(port),
        "--node-config",
        "partition-id=0",
    ]
    refused = subprocess.run([str(BIN / "fedloom"), "supernode", *args], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "needs --approved-app" in refused.stderr
    wrapper = subprocess.Popen([str(BIN / "fedloom"), "supernode", "--approved-app", digest, *args])
    try:
        wrapped = psutil.Process(wrapper.pid)

        def children() -> list[str]:
            return [" ".join(c.cmdline()) for c in wrapped.children()]

        wait_until(lambda: len(children()) == 2, "fedloom supernode did not start both processes", 120)
        node = next(c for c in children() if "flower-supernode" in c)
        gate = next(c for c in children() if "superexec" in c)
        assert node.endswith("--isolation process") and f"--port {port}" in node
        assert f"--runtime-api-address 127.0.0.1:{port}" in gate and f"--approved-app {digest}" in gate
        pids = [c.pid for c in wrapped.children()]
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(60) == 130
        assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
