"""W&B's reachability check (rlbench/loggers/tracking.py), on real sockets of this machine."""

import socket

import pytest

from rlbench.loggers.tracking import unreachable_reason
from tests.conftest import closed_port


@pytest.fixture
def listening_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def no_proxy_env(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_a_listening_server_is_reachable_and_a_closed_port_is_not(no_proxy_env, listening_port):
    assert unreachable_reason(f"http://127.0.0.1:{listening_port}", 5) is None
    port = closed_port()
    assert unreachable_reason(f"http://127.0.0.1:{port}", 5) == f"127.0.0.1:{port} unreachable: Connection refused"


def test_the_default_port_follows_the_scheme(no_proxy_env, monkeypatch):
    tried = []

    def refuse(address, timeout):
        tried.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", refuse)
    unreachable_reason("https://api.example.invalid", 5)
    unreachable_reason("http://api.example.invalid/graphql", 5)
    assert tried == [("api.example.invalid", 443), ("api.example.invalid", 80)]


def test_requests_through_a_proxy_check_the_proxy_unless_the_host_bypasses_it(no_proxy_env, listening_port):
    server, port = f"http://127.0.0.1:{listening_port}", closed_port()
    no_proxy_env.setenv("http_proxy", f"http://127.0.0.1:{port}")
    assert unreachable_reason(server, 5) == f"127.0.0.1:{port} unreachable: Connection refused"
    no_proxy_env.setenv("no_proxy", "127.0.0.1")
    assert unreachable_reason(server, 5) is None


def test_a_value_that_is_no_url_is_left_to_w_and_b(no_proxy_env):
    assert unreachable_reason("not a url", 5) is None
