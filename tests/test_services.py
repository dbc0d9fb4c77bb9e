"""The real servers the suite runs (scripts/services installs them) start, answer and stop."""

from __future__ import annotations

import socket

import pytest
import redis
import redis.asyncio as aioredis
import redis.exceptions

from tests.support import dnsmasq, redisserver
from tests.support.dnsmasq import Dnsmasq
from tests.support.redisserver import RedisServer
from tests.support.servers import free_port, listening_socket


@pytest.mark.anyio
async def test_redis_server_answers_and_can_be_killed_and_restarted(
    redis_server: RedisServer,
) -> None:
    client = aioredis.Redis.from_url(redis_server.url, socket_timeout=0.5)
    try:
        assert await client.incr("k") == 1
        redis_server.stop()
        with pytest.raises(redis.exceptions.ConnectionError):
            await client.incr("k")
        redis_server.start()
        assert await client.incr("k") == 1, "a restarted server starts empty"
    finally:
        await client.aclose()


def test_a_redis_server_whose_port_was_taken_meanwhile_starts_on_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Another process (a pytest-xdist worker) binds the free port first: the server moves.
    taken = listening_socket()
    taken.listen()
    port = taken.getsockname()[1]
    ports = iter([port])
    monkeypatch.setattr(redisserver, "free_port", lambda: next(ports, None) or free_port())
    with taken, RedisServer() as server:
        assert server.port != port
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        assert redis.Redis.from_url(server.url, socket_timeout=5).ping()


def test_a_restarted_redis_server_keeps_its_port_or_says_it_is_taken(
    redis_server: RedisServer,
) -> None:
    redis_server.stop()
    with listening_socket(port=redis_server.port) as taken:
        taken.listen()
        with pytest.raises(RuntimeError, match="already in use"):
            redis_server.start()


def test_a_dnsmasq_whose_port_was_taken_meanwhile_starts_on_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Another process binds the UDP port dnsmasq was given first: it moves to another.
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    ports = iter([port])
    real = dnsmasq.free_udp_and_tcp_port
    monkeypatch.setattr(dnsmasq, "free_udp_and_tcp_port", lambda: next(ports, None) or real())
    with taken, Dnsmasq() as server:
        assert server.port != port
        assert server.nameserver == f"127.0.0.1:{server.port}"
        server.set(f"moved.{dnsmasq.DOMAIN}", ["127.0.0.9"])
        assert server.lookup(f"moved.{dnsmasq.DOMAIN}") == ["127.0.0.9"]
