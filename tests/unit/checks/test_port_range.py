"""The forwarded port range: the agent's range file (and its bad shapes), the owner's
``--port-range``, the sample the probe asks for, and a port list over the probe server's limit
refused before anything is sent (by the client, and by the real server)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from hostcheck.collectors import CollectContext
from hostcheck.collectors.reachability import collect
from hostcheck.errors import PortRangeError
from hostcheck.facts import Unknown
from hostcheck.netprobe.port_range import (
    MAX_RANGE_FILE_BYTES,
    PortRange,
    configured_range,
    judge_range,
    parse_port_range,
    probe_list,
    read_agent_range,
    sample_ports,
)
from hostcheck.netprobe.probe_client import request_probe
from hostcheck.netprobe.probe_protocol import DEFAULT_MAX_PORTS


def write(tmp_path: Path, text: str | bytes, name: str = "host_port_range") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


# -- the file and the option ----------------------------------------------------------------


@pytest.mark.parametrize("text", ["40000-40799", "40000-40799\n", " 40000 - 40799 "])
def test_the_dash_separated_range_is_read(tmp_path: Path, text: str) -> None:
    assert read_agent_range(write(tmp_path, text)) == PortRange(40000, 40799, "agent")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("40000", "is not FIRST-LAST"),
        ("40000:40799", "is not FIRST-LAST"),
        ("", "is not FIRST-LAST"),
        ("40799-40000", "reversed"),
        ("0-100", "outside 1-65535"),
        ("40000-999999999999", "outside 1-65535"),
        ("\x1b[31m40000-40799", "is not FIRST-LAST"),
        ("4" * (MAX_RANGE_FILE_BYTES + 1), "too large"),
        (b"\xff\xfe40000-40799", "not UTF-8"),
    ],
)
def test_a_bad_range_file_is_unknown_with_the_reason(tmp_path: Path, text: str | bytes, reason: str) -> None:
    value = read_agent_range(write(tmp_path, text))
    assert isinstance(value, Unknown) and reason in value.reason
    assert "\x1b" not in value.reason


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "host_port_range"
    os.mkfifo(fifo)
    value = read_agent_range(str(fifo))
    assert isinstance(value, Unknown) and "not a regular file" in value.reason


def test_the_agent_file_wins_over_the_owner_and_a_bad_one_is_not_replaced(tmp_path: Path) -> None:
    assert configured_range("41000-41099", write(tmp_path, "40000-40199")) == PortRange(40000, 40199, "agent")
    bad = configured_range("41000-41099", write(tmp_path, "40199-40000"))
    assert isinstance(bad, Unknown) and "reversed" in bad.reason  # the agent reads its file, not our option
    absent = str(tmp_path / "absent")
    assert configured_range("41000-41099", absent) == PortRange(41000, 41099, "owner")
    none = configured_range(None, absent)
    assert isinstance(none, Unknown) and "--port-range" in none.reason


@pytest.mark.parametrize("text", ["1-", "a-b", "5-4"])
def test_a_bad_owner_range_is_refused(text: str) -> None:
    with pytest.raises(PortRangeError):
        parse_port_range(text, "owner")


# -- the sample -------------------------------------------------------------------------------


@pytest.mark.parametrize(("first", "last", "count"), [(40000, 40199, 8), (40000, 40799, 5), (1, 65535, 2), (40000, 40003, 8)])
def test_the_sample_is_first_last_and_evenly_spaced_between(first: int, last: int, count: int) -> None:
    rng = PortRange(first, last, "owner")
    sample = sample_ports(rng, count)
    if rng.count <= count:
        assert sample == list(range(first, last + 1))
        return
    step = (last - first) / (count - 1)
    assert sample == [first + round(i * step) for i in range(count)]
    assert sample[0] == first and sample[-1] == last and len(set(sample)) == count


def test_the_probe_list_fills_what_the_owner_left() -> None:
    rng = PortRange(40000, 40199, "agent")
    alone = probe_list(rng, [], DEFAULT_MAX_PORTS)
    assert len(alone) == DEFAULT_MAX_PORTS and {proto for _, proto in alone} == {"tcp", "udp"}
    with_owner = probe_list(rng, [22022, 22023, 40000], DEFAULT_MAX_PORTS)
    ports = list(dict.fromkeys(p for p, _ in with_owner))
    assert ports[:3] == [22022, 22023, 40000]
    assert len(with_owner) == DEFAULT_MAX_PORTS  # 40000 is both the owner's and the range's first port
    assert 40199 in ports
    inside = probe_list(rng, [40001], DEFAULT_MAX_PORTS)  # an owner port inside the range, off the sample
    assert len(inside) == DEFAULT_MAX_PORTS and {40000, 40001, 40199} <= {p for p, _ in inside}
    over = probe_list(rng, list(range(30000, 30008)), DEFAULT_MAX_PORTS)
    assert len(over) == 2 * (8 + 2)  # never fewer than the first and the last: the caller refuses it


def test_judge_range_sorts_the_ports_inside_the_range() -> None:
    results = [
        {"port": 40000, "proto": "tcp", "result": "reachable"},
        {"port": 40000, "proto": "udp", "result": "unreachable"},
        {"port": 40199, "proto": "tcp", "result": "unverified"},
        {"port": 22022, "proto": "tcp", "result": "unreachable"},  # not in the range
        {"port": "40001", "proto": "tcp", "result": "unreachable"},  # not a port
    ]
    verdict = judge_range(PortRange(40000, 40199, "agent"), results)
    assert verdict.probed == ((40000, "tcp"), (40000, "udp"), (40199, "tcp"))
    assert verdict.missed == ((40000, "udp"),) and verdict.unverified == ((40199, "tcp"),)
    assert verdict.reached == 1


# -- over the limit: refused before anything is sent -------------------------------------------


class CountingServer:
    """A loopback TCP listener that counts the connections it gets (the "probe server")."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def test_a_list_over_the_limit_is_refused_before_anything_is_sent() -> None:
    server = CountingServer()
    try:
        ports = [(p, proto) for p in range(45000, 45009) for proto in ("tcp", "udp")]
        assert len(ports) > DEFAULT_MAX_PORTS
        out = request_probe(server.url, "t" * 32, ports, timeout=2)
    finally:
        server.close()
    assert out["probed"] is False and f"at most {DEFAULT_MAX_PORTS}" in out["reason"]
    assert {p["result"] for p in out["ports"]} == {"unverified"}
    assert server.accepted == 0


def test_the_collector_probes_the_sample_and_refuses_what_does_not_fit(tmp_path: Path) -> None:
    """Owner ports filling the whole request leave no room for the range: nothing is sent."""
    server = CountingServer()
    try:
        ctx = CollectContext(
            stun_servers=["127.0.0.1:9"], probe_url=server.url, probe_token="t" * 32,
            probe_ports=list(range(45000, 45008)), port_range="40000-40199",
            agent_range_file=str(tmp_path / "absent"), budget_s=4,
        )
        facts = collect(ctx)
    finally:
        server.close()
    assert facts["port_range"] == {"first": 40000, "last": 40199, "count": 200, "source": "owner"}
    inbound = facts["inbound"]
    assert inbound["probed"] is False and "nothing was sent" in inbound["reason"]
    assert server.accepted == 0
