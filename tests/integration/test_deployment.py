"""A real local deployment: one SuperLink and three SuperNodes on 127.0.0.1 (separate processes,
started and stopped here), the fedloom Flower app submitted with ``flwr run``. It must end with the
same adapters and metrics as the in-process runtime, survive a SuperNode killed mid-run (the node
rejoins later), and leave no process behind. A server resumed after a SuperLink restart, across
network namespaces: test_across_namespaces.py."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest

from fedloom.runs.config import dump_config
from tests.conftest import small_config
from tests.integration.cluster import BIN, Cluster, free_port
from tests.integration.flower_check import assert_same_run

pytestmark = pytest.mark.integration

NODES = 3
WORKERS = (0, 1)  # nodes with a persistent node worker; node 2 answers in Flower's per-message process


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("deployment"), NODES, WORKERS)
    c.start()
    yield c
    c.stop()
    left = [p for p in c.spawned if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"processes left behind: {left}"


def deployed(cluster: Cluster, cfg, tmp_path: Path):
    cfg_path = tmp_path / "run.yaml"
    cfg_path.write_text(dump_config(cfg))
    return lambda ws, out: cluster.flwr_run(cfg_path, out)


@pytest.mark.parametrize("method", ["fedavg", "rpa"])  # every method: test_flower_sim.py, same apps
def test_deployment_equals_in_process(cluster, method, tmp_path):
    cfg = small_config(**{"method": method, "federation.fraction": 0.67, "router_hidden": 16,
                          "federation.eval_every": 2})  # fmt: skip
    got = assert_same_run(cfg, tmp_path, deployed(cluster, cfg, tmp_path))
    env = json.loads((tmp_path / "flower" / "env.json").read_text())
    assert env["runtime"] == "flower" and len(env["nodes"]) == NODES and got["method"] == method
    for i in WORKERS:  # those nodes' messages were answered by their workers
        assert "answered a train message" in (cluster.root / f"worker{i}.log").read_text()


def test_secagg_plus_deployment_equals_in_process(cluster, tmp_path):
    """FedAvg under SecAgg+ across the SuperNodes (masks exchanged between separate node processes,
    two of them relaying to their workers) ends where the in-process arithmetic does."""
    cfg = small_config(**{"method": "fedavg", "rounds": 1, "federation.secure_aggregation.enabled": True})
    assert_same_run(cfg, tmp_path, deployed(cluster, cfg, tmp_path), secagg=True)


def test_killed_supernode_is_left_out_and_rejoins(cluster, tmp_path):
    """No deadline decides this test: round 2 ends when the SuperLink declares the killed node offline
    (its heartbeats stop; Flower answers its message with a "node unavailable" error), not at a round
    timeout, so the timeout can be generous enough for a rejoined node loading its model under load."""
    cfg = small_config(**{"rounds": 3, "federation.round_timeout": 900, "federation.eval_every": 3})
    cfg_path, out = tmp_path / "run.yaml", tmp_path / "run"
    cfg_path.write_text(dump_config(cfg))
    run = cluster.flwr_run(cfg_path, out, wait=False)
    metrics = out / "metrics.jsonl"

    def rounds_done() -> int:
        return len(metrics.read_text().splitlines()) if metrics.is_file() else 0

    deadline = time.monotonic() + 300
    while rounds_done() < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    cluster.kill("node2")  # mid-run: round 2 goes on without it once the SuperLink sees it offline
    time.sleep(2)
    cluster.start_node(2)  # the owner comes back with a new node id while round 2 waits ...
    cluster.wait_for_nodes(NODES + 1)
    run.communicate(timeout=600)  # ... and is found again at the start of round 3
    log = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert len(log) == 3
    clients = sorted(log[0]["selected"])
    lost = clients[2]
    assert set(log[1]["failures"]) == {lost} and log[1]["aggregated"]
    assert not log[2]["failures"] and set(log[2]["train"]) == set(clients)


def test_the_nodes_side_reaches_the_fleet_api_only(cluster):
    """The SuperNodes dial the gateway on this machine's public address: there, the Control API (which
    would let anyone submit an app or register a key) answers 403; the SuperLink itself is not listening
    on that address at all."""
    host = cluster.gateway.rsplit(":", 1)[0]
    for path in ("/v1/control/start-run", "/v1/control/register-node", "/v1/runtime/pull-messages"):
        refused = httpx.post(f"http://{cluster.gateway}{path}", content=b"")
        assert refused.status_code == 403, path
    assert httpx.post(f"http://{cluster.gateway}/v1/fleet/get-run", content=b"").status_code != 403
    if host != "127.0.0.1":
        assert socket.socket().connect_ex((host, cluster.port)) != 0


def _tls_and_node_keys(root: Path) -> dict[str, Path]:
    """A CA, a SuperLink certificate for 127.0.0.1 signed by it, and an ECDSA P-384 SuperNode key pair
    in OpenSSH format (what `ssh-keygen -t ecdsa -b 384` writes)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP384R1())
    ca = (x509.CertificateBuilder().subject_name(name("fedloom test CA")).issuer_name(name("fedloom test CA"))
          .public_key(ca_key.public_key()).serial_number(1).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))  # fmt: skip
    server = (x509.CertificateBuilder().subject_name(name("127.0.0.1")).issuer_name(ca.subject)
              .public_key(server_key.public_key()).serial_number(2).not_valid_before(now)
              .not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))  # fmt: skip
    node_key = ec.generate_private_key(ec.SECP384R1())
    pem, raw = serialization.Encoding.PEM, serialization.NoEncryption()
    files = {
        "ca": (root / "ca.crt", ca.public_bytes(pem)),
        "cert": (root / "server.pem", server.public_bytes(pem)),
        "key": (root / "server.key", server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, raw)),
        "node": (root / "node", node_key.private_bytes(pem, serialization.PrivateFormat.OpenSSH, raw)),
        "node_pub": (root / "node.pub", node_key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)),
    }  # fmt: skip
    for path, data in files.values():
        path.write_bytes(data)
    (root / "node").chmod(0o600)
    return {k: p for k, (p, _) in files.items()}


def test_unregistered_supernode_is_rejected_and_a_registered_one_admitted(tmp_path):
    """TLS + SuperNode authentication (landscape.md d.7) through a TLS fleet gateway: a node whose key is
    not registered is refused (ApiError 2004); after `flwr supernode register` the same node is activated
    (the gateway passes the node's signed headers through untouched)."""
    keys = _tls_and_node_keys(tmp_path)
    c = Cluster(tmp_path / "auth", 1)
    connection = f'[superlink.tls]\naddress = "127.0.0.1:{c.port}"\nroot-certificates = "{keys["ca"]}"\n'
    (c.home / "config.toml").write_text(f'[superlink]\ndefault = "tls"\n\n{connection}')
    gateway = free_port()
    node = [str(BIN / "flower-supernode"), "--root-certificates", str(keys["ca"]), "--auth-supernode-private-key",
            str(keys["node"]), "--superlink", f"127.0.0.1:{gateway}", "--port", str(free_port()),
            "--node-config", "partition-id=0"]  # fmt: skip
    tls = ["--ssl-certfile", str(keys["cert"]), "--ssl-keyfile", str(keys["key"])]
    try:
        c._start("superlink", [str(BIN / "flower-superlink"), "--port", str(c.port), "--ssl-ca-certfile",
                               str(keys["ca"]), *tls, "--enable-supernode-auth",
                               "--disable-runtime-dependency-installation"])  # fmt: skip
        upstream = ["--superlink", f"https://127.0.0.1:{c.port}", "--superlink-ca", str(keys["ca"])]
        c._start(
            "gateway", [str(BIN / "fedloom"), "fleet-gateway", "--listen", f"127.0.0.1:{gateway}", *tls, *upstream]
        )
        deadline = time.monotonic() + 60
        for port in (c.port, gateway):
            while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
                assert time.monotonic() < deadline, (c.root / "superlink.log").read_text()[-2000:]
                time.sleep(0.2)
        c._start("stranger", node)  # not registered: the SuperLink refuses to activate it
        log = c.root / "superlink.log"
        while "ApiError:2004" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline + 60, log.read_text()[-2000:]
            time.sleep(0.2)
        assert "Activated node_id" not in log.read_text(errors="replace")
        c.kill("stranger")
        register = subprocess.run([str(BIN / "flwr"), "supernode", "register", str(keys["node_pub"]), "tls"],
                                  env=c.env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert register.returncode == 0, register.stdout + register.stderr
        c._start("node0", node)
        c.wait_for_nodes(1, timeout=60)
    finally:
        c.stop()
