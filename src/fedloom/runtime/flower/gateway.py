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
so node authentication and identity proofs work as without the gateway.
"""

from __future__ import annotations

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

    async def forward(request: Request) -> Response:
        path = request.url.path
        if request.method != "POST" or not is_fleet_path(path):
            log.warning("refused %s %s from %s", request.method, path, request.client.host if request.client else "?")
            return PlainTextResponse("only the Fleet API is served here\n", status_code=403)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        try:
            reply = await upstream.post(path, content=await request.body(), headers=headers)
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
