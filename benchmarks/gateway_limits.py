"""The fleet gateway's limits against the issue-45 probe: an unauthenticated 300 MB POST to
/v1/fleet/push-object. Before the limits the gateway buffered it and forwarded it (+859 MB RSS);
now it answers 413 and its memory stays flat. Not a test: it starts a gateway process and measures it.

    python benchmarks/gateway_limits.py [--megabytes 300]

Prints the status code and the gateway's RSS before and after (psutil), as JSON.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=300)
    args = parser.parse_args()
    port = free_port()
    fedloom = str(Path(sys.executable).with_name("fedloom"))
    gateway = subprocess.Popen([fedloom, "fleet-gateway", "--listen", f"127.0.0.1:{port}",
                                "--superlink", f"http://127.0.0.1:{free_port()}"])  # fmt: skip  # nobody upstream
    try:
        deadline = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline and gateway.poll() is None, "the gateway did not start"
            time.sleep(0.2)
        process = psutil.Process(gateway.pid)
        before = process.memory_info().rss

        def body():  # streamed: this process never holds the whole body either
            chunk = b"x" * 2**20
            for _ in range(args.megabytes):
                yield chunk

        started = time.perf_counter()
        try:
            status = httpx.post(
                f"http://127.0.0.1:{port}/v1/fleet/push-object", content=body(), timeout=300
            ).status_code
        except httpx.HTTPError as exc:  # the gateway may close the connection once it has answered
            status = f"{type(exc).__name__}"
        seconds = time.perf_counter() - started
        after = process.memory_info().rss
        print(json.dumps({"megabytes_sent": args.megabytes, "status": status, "seconds": round(seconds, 2),
                          "gateway_rss_mb_before": round(before / 2**20, 1),
                          "gateway_rss_mb_after": round(after / 2**20, 1)}, indent=2))  # fmt: skip
    finally:
        gateway.terminate()
        gateway.wait(30)


if __name__ == "__main__":
    main()
