"""A node's persistent worker: one long-lived process next to a SuperNode that keeps the backbone,
caches and partitions loaded and answers the messages the node's ClientApp processes relay to it.

Flower starts a fresh ClientApp process for every message (landscape.md d.8), so without a worker
every message pays for importing torch and loading the model. With one, the ClientApp only imports
Flower and forwards the message over a Unix socket; Flower stays in charge of transport,
authentication and scheduling. Start it beside the SuperNode and name its socket in the node config:

    fedloom node-worker --socket /run/fedloom/owner0.sock
    flower-supernode ... --node-config "partition-id=0 worker='/run/fedloom/owner0.sock'"

Messages are answered one at a time; one worker may serve several SuperNodes on the same machine
(each request carries its node's config). The socket is readable by its owner only.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import time
from collections.abc import Callable
from pathlib import Path

from flwr.app import RecordDict

from fedloom.errors import ConfigError
from fedloom.runtime.flower.relay import FAILED, OK, decode, encode, recv_frame, send_frame

log = logging.getLogger(__name__)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            header = json.loads(recv_frame(self.request))
            content = decode(recv_frame(self.request))
        except ConnectionError:  # a probe (another worker checking the socket) or a ClientApp gone mid-send
            return
        t0 = time.perf_counter()
        try:
            answer = self.server.answer  # type: ignore[attr-defined]
            reply, status = encode(answer(header["kind"], content, header["node"])), OK
            seconds = time.perf_counter() - t0
            log.info("answered a %s message for %s in %.2f s", header["kind"], header["node"], seconds)
        except Exception as exc:  # the ClientApp fails the message with this text: no traceback, no paths
            reply, status = f"{type(exc).__name__}: {exc}".encode(), FAILED
            log.exception("answering a %s message failed", header["kind"])
        try:
            send_frame(self.request, status)
            send_frame(self.request, reply)
        except OSError:  # the ClientApp process died while we worked (its message failed on the node)
            log.warning("the ClientApp went away before the reply to its %s message", header["kind"])


Answer = Callable[[str, RecordDict, dict], RecordDict]  # (message kind, content, node config) → reply


class NodeWorker:
    """The worker's Unix-socket server; ``with NodeWorker(path, answer) as w: w.serve_forever()``."""

    def __init__(self, path: Path, answer: Answer) -> None:
        """``answer``: how this node answers a message (`fedloom.runtime.flower.node.Node.answer`)."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        _claim(path)
        old_umask = os.umask(0o177)  # the socket: owner read/write only
        try:
            self.server = socketserver.UnixStreamServer(str(path), _Handler)
            self.server.answer = answer  # type: ignore[attr-defined]
        finally:
            os.umask(old_umask)

    def serve_forever(self) -> None:
        log.info("node worker listening on %s", self.path)
        self.server.serve_forever()

    def shutdown(self) -> None:
        """Stop `serve_forever` running in another thread."""
        self.server.shutdown()

    def __enter__(self) -> NodeWorker:
        return self

    def __exit__(self, *_: object) -> None:
        self.server.server_close()
        self.path.unlink(missing_ok=True)


def _claim(path: Path) -> None:
    """Remove a stale socket file left by a killed worker; refuse if a live worker owns it."""
    if not path.exists():
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()
            return
    raise ConfigError(f"a node worker already listens on {path}")
