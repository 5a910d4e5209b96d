"""The fleet gateway forwards the Fleet API byte for byte and nothing else: the Control API (code
submission, key registration) and the Runtime API are refused on the nodes' side."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from fedloom.errors import ConfigError
from fedloom.runtime.flower.gateway import GatewayConfig, create_gateway, is_fleet_path


class Upstream:
    """A stand-in SuperLink that records what reached it and answers with a fixed body."""

    def __init__(self) -> None:
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        return httpx.Response(200, content=b"\x08\x01reply", headers={"content-type": "application/protobuf"})


@pytest.fixture
def gateway() -> tuple[TestClient, Upstream]:
    upstream = Upstream()
    app = create_gateway(GatewayConfig("0.0.0.0:9092", "http://127.0.0.1:8000"), httpx.MockTransport(upstream))
    return TestClient(app), upstream


def test_fleet_calls_pass_through_byte_for_byte(gateway):
    client, upstream = gateway
    body = bytes(range(256))
    headers = {"content-type": "application/protobuf", "flwr-public-key": "abc", "flwr-signature": "sig=="}
    reply = client.post("/v1/fleet/pull-messages", content=body, headers=headers)
    assert reply.status_code == 200 and reply.content == b"\x08\x01reply"
    (sent,) = upstream.seen
    assert sent.url == "http://127.0.0.1:8000/v1/fleet/pull-messages" and sent.content == body
    assert sent.headers["flwr-public-key"] == "abc" and sent.headers["flwr-signature"] == "sig=="


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/control/start-run"),
        ("POST", "/v1/control/register-node"),
        ("POST", "/v1/runtime/pull-messages"),
        ("GET", "/docs"),
        ("GET", "/v1/fleet/pull-messages"),
        ("POST", "/v1/fleet"),
        ("POST", "/v1/fleetx/get-run"),
    ],
)
def test_everything_but_the_fleet_api_is_refused(gateway, method, path):
    client, upstream = gateway
    assert client.request(method, path).status_code == 403
    assert not upstream.seen


def test_dot_segments_cannot_climb_out_of_the_fleet_api():
    assert is_fleet_path("/v1/fleet/get-fab")
    assert not is_fleet_path("/v1/fleet/../control/start-run")
    assert not is_fleet_path("/v1/fleet/./../control/start-run")


def test_an_unreachable_superlink_is_a_502_not_a_crash():
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    app = create_gateway(GatewayConfig("0.0.0.0:9092", "http://127.0.0.1:8000"), httpx.MockTransport(down))
    assert TestClient(app).post("/v1/fleet/get-run").status_code == 502


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"listen": "9092"}, "HOST:PORT"),
        ({"listen": "0.0.0.0:port"}, "HOST:PORT"),
        ({"superlink": "127.0.0.1:8000"}, "http://"),
        ({"ssl_certfile": Path("server.pem")}, "both"),
        ({"superlink_ca": Path("/nonexistent/ca.crt")}, "no such file"),
    ],
)
def test_bad_gateway_options_are_one_line_errors(kwargs, message):
    options = {"listen": "0.0.0.0:9092", "superlink": "http://127.0.0.1:8000", **kwargs}
    with pytest.raises(ConfigError, match=message):
        GatewayConfig(**options)


def test_ipv6_listen_address():
    config = GatewayConfig("[::]:9092", "http://127.0.0.1:8000")
    assert (config.host, config.port) == ("::", 9092)


def test_a_body_over_the_limit_is_refused_before_it_is_buffered_or_forwarded():
    upstream = Upstream()
    config = GatewayConfig("0.0.0.0:9092", "http://127.0.0.1:8000", max_body=1000)
    client = TestClient(create_gateway(config, httpx.MockTransport(upstream)))
    assert client.post("/v1/fleet/push-object", content=b"x" * 1001).status_code == 413  # by Content-Length

    def streamed():  # chunked: no Content-Length, refused once 1000 bytes have arrived
        for _ in range(100):
            yield b"x" * 100

    assert client.post("/v1/fleet/push-object", content=streamed()).status_code == 413
    assert not upstream.seen
    assert client.post("/v1/fleet/push-object", content=b"x" * 1000).status_code == 200
    assert len(upstream.seen) == 1


def test_requests_beyond_the_concurrency_bound_get_503():
    import asyncio

    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        entered.set()
        await release.wait()
        return httpx.Response(200)

    config = GatewayConfig("0.0.0.0:9092", "http://127.0.0.1:8000", max_concurrent=1)
    app = create_gateway(config, httpx.MockTransport(slow))

    async def two_at_once() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            first = asyncio.create_task(client.post("/v1/fleet/pull-messages", content=b"a"))
            await asyncio.wait_for(entered.wait(), 60)  # the first is in flight, holding the one slot
            second = await client.post("/v1/fleet/pull-messages", content=b"b")
            release.set()
            return [(await first).status_code, second.status_code]

    assert asyncio.run(two_at_once()) == [200, 503]
