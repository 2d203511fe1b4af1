"""The probe server: its pure request parser (table + Hypothesis), its rules (token, rate,
caller-only connect-back), a real server and client talking over loopback, and one test per
attack on it (token flood, slowloris, connection flood, TLS pinning, redirects, disconnects,
the token in argv). Loopback only; each attack is bounded to a few seconds."""

from __future__ import annotations

import ipaddress
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostcheck.errors import ProbeRequestError
from hostcheck.netprobe import probe_protocol as ps
from hostcheck.netprobe.probe_client import request_probe
from hostcheck.netprobe.probe_protocol import (
    DEFAULT_MAX_PORTS,
    PortProbe,
    ProbeRequest,
    check_token,
    parse_probe_request,
    token_matches,
)
from hostcheck.probeserver.connectback import UDP_WAIT_S
from hostcheck.probeserver.limits import (
    ByteBudget,
    ConnectionTable,
    Limits,
    OutOfFiles,
    RateLimiter,
    source_prefix,
)
from hostcheck.probeserver.server import ProbeService
from tests.probe_fixtures import TOKEN, RunningThread, free_port, start_in_thread

NONCE = "abcdefghijklmnop"


def body(obj: object) -> bytes:
    return json.dumps(obj).encode()


def port(p: int = 40000, proto: str = "tcp", nonce: str = NONCE, **extra: object) -> dict[str, object]:
    return {"port": p, "proto": proto, "nonce": nonce, **extra}


# -- the parser ----------------------------------------------------------------------------------


def test_valid_request() -> None:
    req = parse_probe_request(body({"ports": [port(), port(40000, "udp", "x" * 64)]}))
    assert req == ProbeRequest((PortProbe(40000, "tcp", NONCE), PortProbe(40000, "udp", "x" * 64)))


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"\xff\xfe", "not JSON"),
        (b"{", "not JSON"),
        (b"[1]", "JSON object"),
        (body({}), "non-empty list"),
        (body({"ports": []}), "non-empty list"),
        (body({"ports": "40000"}), "non-empty list"),
        (
            body({"ports": [port()], "host": "192.0.2.1"}),
            "connects back only to the address the request came from",
        ),
        (body({"ports": [port()], "target": "192.0.2.1"}), "unknown field 'target'"),
        (body({"ports": [port(address="192.0.2.1")]}), "exactly port, proto, nonce"),
        (body({"ports": [{"port": 1, "proto": "tcp"}]}), "exactly port, proto, nonce"),
        (body({"ports": [5]}), "must be an object"),
        (body({"ports": [port(0)]}), "integer 1-65535"),
        (body({"ports": [port(65536)]}), "integer 1-65535"),
        (body({"ports": [port(True)]}), "integer 1-65535"),
        (body({"ports": [port("80")]}), "integer 1-65535"),
        (body({"ports": [port(proto="icmp")]}), "'tcp' or 'udp'"),
        (body({"ports": [port(nonce="short")]}), "16-64 characters"),
        (body({"ports": [port(nonce="a" * 65)]}), "16-64 characters"),
        (body({"ports": [port(nonce="spaces are not ok!")]}), "16-64 characters"),
        (body({"ports": [port(), port()]}), "repeats tcp/40000"),
        (body({"ports": [port(p) for p in range(1, 18)]}), "at most 16 ports"),
        (b" " * (ps.MAX_BODY + 1), "larger than"),
        (b"[" * 5000, "larger than"),
    ],
)
def test_refused_requests(raw: bytes, message: str) -> None:
    with pytest.raises(ProbeRequestError, match=message.replace("(", r"\(").replace("'", "'")):
        parse_probe_request(raw)


def test_deep_nesting_is_refused_not_crashing() -> None:
    with pytest.raises(ProbeRequestError):
        parse_probe_request(b"[" * 2000 + b"]" * 2000)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.binary(max_size=600))
@settings(max_examples=400)
def test_parser_on_arbitrary_bytes(raw: bytes) -> None:
    try:
        parse_probe_request(raw)
    except ProbeRequestError:
        pass


@given(json_values)
@settings(max_examples=400)
def test_parser_on_arbitrary_json(value: object) -> None:
    try:
        req = parse_probe_request(body(value))
    except ProbeRequestError:
        return
    assert 1 <= len(req.ports) <= 16


valid_ports = st.lists(
    st.builds(
        PortProbe,
        port=st.integers(1, 65535),
        proto=st.sampled_from(["tcp", "udp"]),
        nonce=st.text(alphabet="ABCXYZabcxyz0189_-", min_size=16, max_size=64),
    ),
    min_size=1,
    max_size=16,
    unique_by=lambda p: (p.port, p.proto),
)


@given(valid_ports)
@settings(max_examples=300)
def test_valid_requests_round_trip(ports: list[PortProbe]) -> None:
    raw = body({"ports": [{"port": p.port, "proto": p.proto, "nonce": p.nonce} for p in ports]})
    assert parse_probe_request(raw) == ProbeRequest(tuple(ports))


@given(valid_ports, st.text(min_size=1, max_size=12).filter(lambda k: k != "ports"), json_values)
@settings(max_examples=300)
def test_any_extra_field_is_refused(ports: list[PortProbe], key: str, value: object) -> None:
    """However a target is smuggled in, the request is refused (the server has no such field)."""
    raw = body({"ports": [{"port": p.port, "proto": p.proto, "nonce": p.nonce} for p in ports], key: value})
    with pytest.raises(ProbeRequestError):
        parse_probe_request(raw)


@given(
    valid_ports, st.integers(0, 15), st.text(min_size=1, max_size=12).filter(lambda k: k not in ps.PORT_KEYS)
)
@settings(max_examples=200)
def test_any_extra_per_port_field_is_refused(ports: list[PortProbe], index: int, key: str) -> None:
    items: list[dict[str, object]] = [{"port": p.port, "proto": p.proto, "nonce": p.nonce} for p in ports]
    items[index % len(items)][key] = "192.0.2.1"
    with pytest.raises(ProbeRequestError):
        parse_probe_request(body({"ports": items}))


# -- rules ------------------------------------------------------------------------------------------


def test_token_comparison() -> None:
    assert token_matches(TOKEN, TOKEN)
    assert not token_matches(TOKEN[:-1] + "x", TOKEN)
    assert not token_matches("", TOKEN)
    assert not token_matches(None, TOKEN)
    assert not token_matches("é" * 5, TOKEN)


def test_rate_limiter_windows() -> None:
    lim = RateLimiter(per_peer=2, overall=3)
    assert lim.allow("a", 0) and lim.allow("a", 1)
    assert not lim.allow("a", 2)  # per caller
    assert lim.allow("b", 3)
    assert not lim.allow("c", 4)  # overall
    assert lim.allow("a", 61)  # the window slid


@pytest.mark.parametrize("bad", ["short", "x" * 513, "with space in it 0123", "ünïcödé-token-0123456789"])
def test_unusable_tokens_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="probe token"):
        check_token(bad)
    with pytest.raises(ValueError):
        ProbeService(bad, Limits())


# -- a real server on loopback ---------------------------------------------------------------------------


@pytest.fixture
def probe_server() -> Iterator[RunningThread]:
    srv = start_in_thread(Limits(max_ports=4, rate_per_min=20, request_deadline_s=10))
    try:
        yield srv
    finally:
        srv.stop()


def post(
    url: str, payload: object, token: str | None = TOKEN, headers: dict[str, str] | None = None
) -> tuple[int, dict]:
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        hdrs["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url + "/probe", data=body(payload), headers=hdrs, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_client_proves_reachable_ports(probe_server: RunningThread) -> None:
    p = free_port(socket.SOCK_STREAM)
    out = request_probe(probe_server.url, TOKEN, [(p, "tcp"), (p, "udp")], timeout=8)
    assert out["probed"] is True and out["peer"] == "127.0.0.1" and out["reason"] is None
    assert [(x["proto"], x["result"], x["detail"]) for x in out["ports"]] == [
        ("tcp", "reachable", "connected"),
        ("udp", "reachable", "echoed"),
    ]


def test_closed_ports_are_unreachable(probe_server: RunningThread) -> None:
    """Asked directly (no client listeners), the server reports what it met."""
    p = free_port(socket.SOCK_STREAM)
    status, answer = post(probe_server.url, {"ports": [port(p, "tcp"), port(p, "udp")]})
    assert status == 200
    assert [(r["result"], r["detail"]) for r in answer["results"]] == [
        ("unreachable", "refused"),
        ("unreachable", "no echo"),
    ]


def test_port_in_use_here_is_unverified(probe_server: RunningThread) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy:
        busy.bind(("0.0.0.0", 0))
        p = busy.getsockname()[1]
        out = request_probe(probe_server.url, TOKEN, [(p, "udp")], timeout=8)
    (result,) = out["ports"]
    assert result["result"] == "unverified" and "port in use on this host" in result["detail"]


def test_forwarded_for_headers_do_not_change_the_target(probe_server: RunningThread) -> None:
    p = free_port(socket.SOCK_STREAM)
    status, answer = post(
        probe_server.url,
        {"ports": [port(p)]},
        headers={"X-Forwarded-For": "192.0.2.77", "X-Real-IP": "192.0.2.77"},
    )
    assert status == 200 and answer["peer"] == "127.0.0.1"


def test_third_party_target_is_refused(probe_server: RunningThread) -> None:
    status, answer = post(probe_server.url, {"ports": [port()], "host": "192.0.2.1"})
    assert status == 400 and "connects back only" in answer["error"]
    assert probe_server.service.stats["probes"] == 0


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789abcdef", TOKEN + "x"])
def test_wrong_or_missing_token(probe_server: RunningThread, token: str | None) -> None:
    status, _ = post(probe_server.url, {"ports": [port()]}, token=token)
    assert status == 401 and probe_server.service.stats["probes"] == 0
    assert probe_server.service.stats["failed_authentications"] == 1


def test_client_reports_refusal_as_unverified(probe_server: RunningThread) -> None:
    out = request_probe(probe_server.url, "wrong-token-0123456789abcdef", [(40001, "tcp")], timeout=5)
    assert out["probed"] is False and "HTTP 401" in out["reason"]
    assert out["ports"][0]["result"] == "unverified"


def test_rate_limit_charges_authenticated_callers(probe_server: RunningThread) -> None:
    codes = [post(probe_server.url, {"nope": 1})[0] for _ in range(21)]
    assert codes[:20] == [400] * 20 and codes[20] == 429


def test_too_many_ports(probe_server: RunningThread) -> None:
    status, answer = post(probe_server.url, {"ports": [port(p) for p in range(1000, 1005)]})
    assert status == 400 and "at most 4 ports" in answer["error"]


def test_a_full_request_waits_for_its_ports_at_once() -> None:
    """Sixteen UDP ports that never echo cost one UDP wait, not one per few ports: a request
    served in turns would outlast the client's 5 s."""
    srv = start_in_thread(Limits(rate_per_min=20, request_deadline_s=10))
    try:
        silent: set[int] = set()
        while len(silent) < DEFAULT_MAX_PORTS:
            silent.add(free_port())
        started = time.monotonic()
        status, answer = post(srv.url, {"ports": [port(p, "udp") for p in silent]})
        elapsed = time.monotonic() - started
    finally:
        srv.stop()
    assert status == 200 and {r["detail"] for r in answer["results"]} == {"no echo"}
    assert elapsed < 2 * UDP_WAIT_S, elapsed


def test_unknown_paths_and_health(probe_server: RunningThread) -> None:
    with urllib.request.urlopen(probe_server.url + "/health", timeout=5) as resp:
        assert json.loads(resp.read()) == {"ok": True}
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(probe_server.url + "/admin", timeout=5)
    assert err.value.code == 404


def test_unreachable_probe_server() -> None:
    p = free_port(socket.SOCK_STREAM)
    out = request_probe(f"http://127.0.0.1:{p}", TOKEN, [(p, "tcp")], timeout=2)
    assert out["probed"] is False and "not reachable" in out["reason"]


@pytest.mark.parametrize(
    "url, fingerprint, message",
    [
        ("ftp://example.invalid", None, "http://"),
        ("http://user:pw@127.0.0.1:1", None, "credentials"),
        ("http://127.0.0.1:1", "SHA256:" + "AB:" * 31 + "AB", "needs an https"),
        ("https://127.0.0.1:1", "not-a-fingerprint", "64 hex digits"),
    ],
)
def test_bad_url_or_fingerprint(url: str, fingerprint: str | None, message: str) -> None:
    out = request_probe(url, TOKEN, [(1, "tcp")], timeout=1, fingerprint=fingerprint)
    assert out["probed"] is False and message in out["reason"]


def test_server_logs_nothing_sensitive(probe_server: RunningThread, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="hostcheck.probe_server")
    p = free_port(socket.SOCK_STREAM)
    post(probe_server.url, {"ports": [port(p)]})
    post(probe_server.url, {"ports": [port(p)]}, token="bad-token-bad-token")
    probe_server.call(probe_server.server.log_summary)
    text = caplog.text
    assert "probe done" in text and "1 failed authentications" in text
    for secret in (TOKEN, NONCE, "127.0.0.1", "bad-token"):
        assert secret not in text


def test_the_audit_does_not_load_the_server() -> None:
    import subprocess
    import sys

    code = (
        "import sys, hostcheck.collectors.reachability;"
        "print(sorted(m for m in sys.modules if m.startswith('aiohttp') or m.startswith('hostcheck.probeserver')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


# -- connection slots, prefixes, byte budget (pure bookkeeping) ------------------------------------


@pytest.mark.parametrize(
    "address, v4, v6, expected",
    [
        ("192.0.2.77", 24, 56, "192.0.2.0/24"),
        ("192.0.2.77", 32, 56, "192.0.2.77/32"),
        ("198.51.100.200", 16, 56, "198.51.0.0/16"),
        ("::ffff:192.0.2.77", 24, 56, "192.0.2.0/24"),  # IPv4-mapped: the IPv4 address it carries
        ("2001:db8:aa:bbcc:1:2:3:4", 24, 56, "2001:db8:aa:bb00::/56"),
        ("2001:db8:aa:bbcc:1:2:3:4", 24, 64, "2001:db8:aa:bbcc::/64"),
        ("fe80::1%eth0", 24, 64, "fe80::/64"),
        ("::1", 24, 56, "::/56"),
    ],
)
def test_source_prefix(address: str, v4: int, v6: int, expected: str) -> None:
    assert source_prefix(address, v4, v6) == expected


@given(st.integers(0, 2**72 - 1), st.integers(0, 2**72 - 1))
@settings(max_examples=200)
def test_ipv6_rotation_inside_a_56_is_one_caller(low_a: int, low_b: int) -> None:
    """Any two addresses that share their top 56 bits (one customer's /56, any /64 inside it)
    are one prefix; changing a bit of the top 56 makes another one."""
    base = 0x2001_0DB8_00AB_CD << 72
    a, b = ipaddress.IPv6Address(base | low_a), ipaddress.IPv6Address(base | low_b)
    assert source_prefix(str(a)) == source_prefix(str(b))
    other = ipaddress.IPv6Address((base ^ (1 << 72)) | low_a)
    assert source_prefix(str(other)) != source_prefix(str(a))


class Conn:
    """A stand-in for a transport: records that the table aborted it."""

    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


def test_table_sheds_the_oldest_idle_connection() -> None:
    """Overall cap: the oldest connection that has not shown the token goes at once, never one
    that has; when all have, the newcomer is refused."""
    lim = Limits(max_connections=4, max_connections_per_source=4, max_connections_per_prefix=4, shed_after_s=1.0)
    table = ConnectionTable(lim)
    conns = [Conn() for _ in range(6)]
    slots = [table.open(f"10.0.{i}.1", c.abort, now=i * 0.1)[0] for i, c in enumerate(conns[:4])]
    assert all(slots) and table.slots == 4
    assert slots[1] is not None
    table.authenticate(slots[1])
    fifth, shed = table.open("10.0.9.1", conns[4].abort, now=0.5)
    assert fifth is not None and shed == 1 and conns[0].aborted and table.slots == 4
    # #1 is authenticated: the next newcomer takes #2's slot, never #1's.
    sixth, shed = table.open("10.0.9.2", conns[5].abort, now=0.6)
    assert sixth is not None and shed == 1 and conns[2].aborted and not conns[1].aborted
    for s in (slots[3], fifth, sixth):
        assert s is not None
        table.authenticate(s)
    late = Conn()
    assert table.open("10.0.9.3", late.abort, now=100) == (None, 0) and not late.aborted
    assert slots[0] is not None
    table.close(slots[0])  # the shed connection's own report of its loss changes nothing
    assert table.slots == 4


def test_one_source_must_let_its_connections_idle_before_replacing_them() -> None:
    """Per-address (and per-prefix) cap: a newcomer from that source is refused until the
    source's oldest connection has idled ``shed_after_s``, then takes its slot."""
    lim = Limits(max_connections=64, max_connections_per_source=2, shed_after_s=1.0)
    table = ConnectionTable(lim)
    first, second = Conn(), Conn()
    table.open("192.0.2.1", first.abort, now=0)
    table.open("192.0.2.1", second.abort, now=0.5)
    assert table.open("192.0.2.1", Conn().abort, now=0.9) == (None, 0)
    slot, shed = table.open("192.0.2.1", Conn().abort, now=1.0)
    assert slot is not None and shed == 1 and first.aborted and not second.aborted


def test_table_caps_per_address_and_per_prefix() -> None:
    lim = Limits(max_connections=64, max_connections_per_source=2, max_connections_per_prefix=3)
    table = ConnectionTable(lim)
    for host in range(1, 9):  # eight addresses in one /24, a connection a second
        table.open(f"198.51.100.{host}", Conn().abort, now=host)
    assert table.by_prefix == {"198.51.100.0/24": 3} and table.slots == 3
    for i in range(5):  # one address: its own oldest goes
        table.open("203.0.113.5", Conn().abort, now=10 + i)
    assert table.by_address["203.0.113.5"] == 2 and table.slots == 5


def test_a_full_prefix_is_shared_fairly_before_the_patient_rule() -> None:
    """Two addresses hold a /24's four slots, two each, all fresh. A newcomer from a third
    address of the /24 takes the oldest of the heaviest at once; the attacker's shed address,
    reconnecting, finds the prefix balanced and must wait for the patient rule, so it cannot
    take the newcomer's slot back; nor can the newcomer's own second connection."""
    lim = Limits(max_connections=64, max_connections_per_source=8, max_connections_per_prefix=4, shed_after_s=1.0)
    table = ConnectionTable(lim)
    held = [Conn() for _ in range(4)]
    for i, conn in enumerate(held):
        table.open(f"198.51.100.{1 + i % 2}", conn.abort, now=i * 0.01)
    owner = Conn()
    slot, shed = table.open("198.51.100.200", owner.abort, now=0.05)
    assert slot is not None and shed == 1 and held[0].aborted and table.by_prefix == {"198.51.100.0/24": 4}
    # 198.51.100.1 now holds one, .2 two, the owner one: nobody holds two more than .1
    assert table.open("198.51.100.1", Conn().abort, now=0.06) == (None, 0)
    assert table.open("198.51.100.200", Conn().abort, now=0.07) == (None, 0) and not owner.aborted
    # an address holding none takes from the heaviest (.2), never from the owner
    slot, shed = table.open("198.51.100.3", Conn().abort, now=0.08)
    assert slot is not None and shed == 1 and held[1].aborted and not owner.aborted


def test_table_caps_handshakes_and_stays_bounded() -> None:
    """IPv6 rotation through a whole /48, 10 000 addresses a second apart: the table never
    holds more than its caps, and what a shed connection held is given back."""
    lim = Limits(max_connections=32, max_connections_per_source=8, max_connections_per_prefix=8, max_handshakes=5)
    table = ConnectionTable(lim)
    for i in range(10_000):
        slot, _ = table.open(f"2001:db8:1:{i % 65536:x}::{i % 7 + 1}", Conn().abort, handshaking=True, now=i)
        assert slot is not None
        assert table.handshakes <= 5 and table.slots <= 32
    assert len(table.by_address) <= 32 and len(table.by_prefix) <= 32 and len(table._unauthenticated) <= 32
    done, _ = table.open("192.0.2.1", Conn().abort, handshaking=True, now=20_000)
    assert done is not None
    table.handshake_done(done)
    table.authenticate(done)
    assert table.handshakes == 4


def test_byte_budget_per_hour() -> None:
    budget = ByteBudget(per_hour=1000)
    assert budget.reserve(600, now=0) == 600
    assert budget.reserve(600, now=1) == 400  # running streams together never pass the budget
    assert budget.available(now=1) == 0
    budget.settle(600, 600, now=2)
    budget.settle(400, 100, now=3)  # a stream that moved less gives the rest back
    assert budget.spent(now=3) == 700 and budget.available(now=3) == 300
    budget.charge(300, now=100)  # over a minute after the first charge: a new bucket
    assert budget.available(now=100) == 0
    # A bucket leaves the window an hour after its first charge (t=2): 700 bytes come back then.
    assert budget.retry_after(now=100) == 2 + 3600 - 100
    assert budget.available(now=3601) == 0
    assert budget.available(now=3602) == 1000 - 300
    assert budget.available(now=3700) == 1000


def test_out_of_files_warnings_are_rate_limited() -> None:
    oof = OutOfFiles(every_s=60)
    assert oof.note(0) == 1  # the first at once
    assert [oof.note(t) for t in (1, 2, 30)] == [None, None, None]
    assert oof.note(61) == 4  # then one per minute, with the count since the last
    assert oof.flush(62) is None and oof.total == 5


def test_no_import_cycle_in_the_package() -> None:
    """Module imports (those under ``TYPE_CHECKING`` and inside functions included) form no
    cycle: the server builds on the shared protocol and limits modules, never the reverse."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "hostcheck"
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    # A package importing its own submodules is not a cycle of code (it is how packages load).
    graph = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, trail: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(trail[trail.index(d):] + [d] if d in trail else [m, d])
            elif d not in state:
                visit(d, trail + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []
