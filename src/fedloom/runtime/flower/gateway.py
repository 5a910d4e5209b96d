"""The nodes' only door to the SuperLink: a reverse proxy that forwards the Fleet API and nothing else.

Flower 1.42 serves its Fleet API (what SuperNodes call), its Control API (``flwr run``, ``flwr supernode
register``, ``flwr stop``: whoever reaches it can submit code and register keys) and its Runtime API on
one ``--host``/``--port``. Keep the SuperLink on loopback (its default host) and publish this gateway
instead: nodes reach ``/v1/fleet/*``; every other path gets 403 on the public side, so the Control API
is reachable only from the coordinator itself (or through an SSH tunnel)::

    flower-superlink ... --port 8000                        # 127.0.0.1 only
    fedloom fleet-gateway --listen 0.0.0.0:9092 --superlink http://127.0.0.1:8000 \\
        --ssl-certfile server.pem --ssl-keyfile server.key  # TLS for the nodes
    flower-supernode --superlink COORDINATOR:9092 --root-certificates ca.crt ...

Requests and replies pass through byte for byte (headers included: SuperNode authentication signs them),
so node authentication and identity proofs work as without the gateway. The door is unauthenticated, so
it has limits before anything is buffered or forwarded: a body above ``max_body`` is refused with 413
(a node pushes arrays in chunks of ``FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE``, 5 MB, so its largest request
is one chunk or one message's config record; the default leaves room for SecAgg+'s masked vectors of a
LoRA adapter at GPU scale), and requests beyond ``max_concurrent`` at once get 503.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from fedloom.errors import ConfigError

log = logging.getLogger(__name__)

FLEET_PREFIX = "/v1/fleet/"
# hop-by-hop headers (RFC 9110 §7.6.1) and the ones httpx / uvicorn set for their own connection
_DROPPED = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}


@dataclass(frozen=True)
class GatewayConfig:
    """Where the gateway listens, where the SuperLink is, and the TLS on each side."""

    listen: str  # host:port the nodes reach, e.g. 0.0.0.0:9092
    superlink: str  # http://127.0.0.1:8000 or https://127.0.0.1:8000
    ssl_certfile: Path | None = None  # public side: the certificate the nodes verify
    ssl_keyfile: Path | None = None
    superlink_ca: Path | None = None  # SuperLink side, when it runs with TLS
    timeout: float = 120.0
    max_body: int = 64 * 2**20  # bytes (64 MiB: 12 of Flower's array chunks)
    max_concurrent: int = 64

    def __post_init__(self) -> None:
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"--listen must be HOST:PORT, got {self.listen!r}")
        if not self.superlink.startswith(("http://", "https://")):
            raise ConfigError(f"--superlink must be an http:// or https:// URL, got {self.superlink!r}")
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ConfigError("give both --ssl-certfile and --ssl-keyfile, or neither")
        for path in (self.ssl_certfile, self.ssl_keyfile, self.superlink_ca):
            if path is not None and not path.is_file():
                raise ConfigError(f"no such file: {path}")

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])


def is_fleet_path(path: str) -> bool:
    """The only requests the gateway forwards: Fleet API calls (normalized, so ``..`` cannot escape)."""
    parts = [p for p in path.split("/") if p]
    return path.startswith(FLEET_PREFIX) and ".." not in parts and "." not in parts and len(parts) >= 3


def create_gateway(config: GatewayConfig, transport: httpx.AsyncBaseTransport | None = None) -> Starlette:
    """The ASGI app: POST /v1/fleet/* forwarded to the SuperLink, everything else refused.
    ``transport`` replaces the network hop to the SuperLink (tests)."""
    verify: bool | str = str(config.superlink_ca) if config.superlink_ca else True
    base = config.superlink.rstrip("/")
    upstream = httpx.AsyncClient(base_url=base, verify=verify, timeout=config.timeout, transport=transport)

    slots = asyncio.Semaphore(config.max_concurrent)

    async def forward(request: Request) -> Response:
        path = request.url.path
        peer = request.client.host if request.client else "?"
        if request.method != "POST" or not is_fleet_path(path):
            log.warning("refused %s %s from %s", request.method, path, peer)
            return PlainTextResponse("only the Fleet API is served here\n", status_code=403)
        if slots.locked():
            log.warning("busy: refused %s from %s (%d requests in flight)", path, peer, config.max_concurrent)
            return PlainTextResponse("too many requests at once\n", status_code=503)
        async with slots:
            body = await _bounded_body(request, config.max_body)
            if body is None:
                log.warning("refused %s from %s: body over %d bytes", path, peer, config.max_body)
                return PlainTextResponse("request body too large\n", status_code=413)
            return await _forward(path, body, request)

    async def _forward(path: str, body: bytes, request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        try:
            reply = await upstream.post(path, content=body, headers=headers)
        except httpx.HTTPError as err:
            log.warning("SuperLink unreachable at %s: %s", config.superlink, err)
            return PlainTextResponse("SuperLink unreachable\n", status_code=502)
        kept = {k: v for k, v in reply.headers.items() if k.lower() not in _DROPPED | {"content-encoding"}}
        return Response(reply.content, status_code=reply.status_code, headers=kept)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await upstream.aclose()

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)], lifespan=lifespan)


async def _bounded_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None as soon as it is known to exceed ``limit`` bytes (by its declared
    length, or while it streams in): never more than ``limit`` bytes are held."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def serve_gateway(config: GatewayConfig) -> None:
    """Run the gateway until interrupted (uvicorn; TLS when a certificate is given)."""
    import uvicorn

    uvicorn.run(
        create_gateway(config),
        host=config.host,
        port=config.port,
        ssl_certfile=str(config.ssl_certfile) if config.ssl_certfile else None,
        ssl_keyfile=str(config.ssl_keyfile) if config.ssl_keyfile else None,
        log_level="warning",
        access_log=False,
    )
