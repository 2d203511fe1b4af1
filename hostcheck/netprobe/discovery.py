"""NAT behaviour discovery (RFC 5780) on top of bounded STUN transactions.

Order matters. The mapping tests (section 4.3) run first, all on one socket. The filtering
tests (section 4.4) then run each on a fresh socket, so that an answer sent from the
server's other address cannot create state in the NAT that changes a later test (the
artefact that made pystun3 call ordinary routers "symmetric"). The two filtering tests and
the hairpinning test are independent of each other and run at the same time, which keeps
the worst case (a filtering NAT: both tests wait out their timeout) to one timeout.

Every configured server is asked first, at once, from the same socket (mapping test I to
each): the first that answers with a usable OTHER-ADDRESS runs the RFC 5780 tests, so a dead
first server costs nothing; and when no server speaks RFC 5780, the mapped addresses two
servers at different addresses saw for that one socket still tell whether the mapping
depends on the destination.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

from hostcheck.models import NatBehaviour
from hostcheck.netprobe.stun_client import (
    DEFAULT_TIMING,
    HAIRPIN_TIMING,
    Outcome,
    Timing,
    Transaction,
    binding_transaction,
    describe_failure,
    fmt_address,
    run_transactions,
    source_address,
    udp_socket,
)
from hostcheck.netprobe.stun_codec import Address, binding_request

OTHER_WAIT_S = 0.3
"""Once an RFC 5780 server answered, how long the other servers still get to answer."""


@dataclass
class ServerAnswer:
    """One server's answer to mapping test I on the shared socket."""

    server: Address
    mapped: Address | None = None
    other_address: Address | None = None
    error: str | None = None


@dataclass
class NatDiscovery:
    """What RFC 5780 discovery found against one server."""

    server: Address
    """The server the behaviour tests ran against (the first usable one)."""
    mapping: NatBehaviour = NatBehaviour.UNKNOWN
    filtering: NatBehaviour = NatBehaviour.UNKNOWN
    local: Address | None = None
    mapped: Address | None = None
    other_address: Address | None = None
    nat_present: bool | None = None
    hairpinning: bool | None = None
    reasons: list[str] = field(default_factory=list)
    tests: list[dict[str, object]] = field(default_factory=list)
    packets_sent: int = 0
    duration_s: float = 0.0
    rtt_max: float | None = None
    answers: list[ServerAnswer] = field(default_factory=list)
    """Every server's mapped address for the same local socket, in the order given."""
    mapping_method: str | None = None
    """"rfc5780" (tests II/III), "two-servers" (mapped addresses compared), or None."""

    @property
    def reason(self) -> str | None:
        return "; ".join(self.reasons) if self.reasons else None

    def _record(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            self.tests.append(o.summary())
            self.packets_sent += o.sent
            if o.ok and o.rtt_s is not None:
                self.rtt_max = max(self.rtt_max or 0.0, o.rtt_s)


def filtering_timing(timing: Timing, rtt: float | None) -> Timing:
    """The filtering tests' schedule, from the round trip the mapping tests measured.

    A filtering NAT answers these tests with silence, so their timeout is the price of every
    run behind one. Once the server's round trip is known (RFC 8489 lets the RTO follow it),
    waiting many round trips plus a second is enough; without a measurement, the defaults.
    """
    if rtt is None:
        return timing
    timeout = min(timing.probe_timeout, max(1.5, 1.2 + 4 * rtt))
    rto = min(timing.rto, max(0.2, 2 * rtt))
    return Timing(rto=rto, retransmissions=timing.retransmissions, probe_timeout=timeout)


def discover_nat(
    server: Address | list[Address],
    *,
    deadline: float,
    timing: Timing = DEFAULT_TIMING,
    hairpin: bool = True,
) -> NatDiscovery:
    """Classify the NAT between this host and the internet, using the first usable server.

    ``server`` is one address or several (same family as the first; the others are
    skipped). Never raises for network conditions and never runs past ``deadline``;
    anything it could not decide is "unknown" with the reason in ``reasons``.
    """
    servers = [server] if isinstance(server, tuple) else list(server)
    if not servers:
        raise ValueError("no STUN server to discover against")
    started = time.monotonic()
    family = socket.AF_INET6 if ":" in servers[0][0] else socket.AF_INET
    servers = [s for s in servers if (":" in s[0]) == (family == socket.AF_INET6)]
    result = NatDiscovery(servers[0])
    try:
        _discover(result, servers, family, deadline, timing, hairpin)
    finally:
        result.duration_s = round(time.monotonic() - started, 3)
    return result


def _usable_other(server: Address, other: Address | None) -> bool:
    return other is not None and other[0] != server[0] and other[1] != server[1]


def _ask_all(
    result: NatDiscovery, main: socket.socket, servers: list[Address], deadline: float, timing: Timing
) -> list[ServerAnswer]:
    """Mapping test I to every server at once; stop soon after an RFC 5780 server answered."""
    txns = [binding_transaction(f"mapping I ({fmt_address(s)})", main, s, timing=timing) for s in servers]
    first_rfc: list[float] = []

    def enough(ts: list[Transaction]) -> bool:
        if not first_rfc:
            for t in ts:
                msg = t.outcome.message
                if t.done and t.outcome.ok and msg is not None and _usable_other(t.dest, msg.other_address):
                    first_rfc.append(time.monotonic())
                    break
        return bool(first_rfc) and time.monotonic() - first_rfc[0] >= OTHER_WAIT_S

    outcomes = run_transactions(txns, deadline, stop=enough if len(txns) > 1 else None)
    result._record(outcomes)
    answers = []
    for srv, o in zip(servers, outcomes, strict=False):
        msg = o.message
        if o.ok and msg is not None and msg.mapped is not None:
            answers.append(ServerAnswer(srv, msg.mapped, msg.other_address))
        elif o.ok:
            answers.append(ServerAnswer(srv, error=f"{fmt_address(srv)} answered without a mapped address"))
        else:
            answers.append(ServerAnswer(srv, error=describe_failure(o)))
    return answers


def _discover(
    result: NatDiscovery, servers: list[Address], family: int, deadline: float, timing: Timing, hairpin: bool
) -> None:
    try:
        local_ip = source_address(servers[0], family)
        main = udp_socket(family, local_ip)
    except OSError as exc:
        result.reasons.append(f"no route to STUN server {fmt_address(servers[0])}: {exc.strerror or exc}")
        return
    with main:
        result.local = (local_ip, main.getsockname()[1])
        result.answers = _ask_all(result, main, servers, deadline, timing)
        answered = [a for a in result.answers if a.mapped is not None]
        if not answered:
            result.reasons.extend(a.error or "no answer" for a in result.answers)
            return
        rfc = next((a for a in answered if _usable_other(a.server, a.other_address)), None)
        chosen = rfc or answered[0]
        result.server = chosen.server
        result.mapped = chosen.mapped
        result.other_address = chosen.other_address
        result.nat_present = chosen.mapped != result.local
        if rfc is None:
            result.reasons.append(_no_rfc5780_reason(answered))
            result.mapping = _mapping_from_servers(result, answered)
            return
        if not result.nat_present:
            # Nothing translates our address: the mapping is trivially endpoint-independent.
            result.mapping = NatBehaviour.ENDPOINT_INDEPENDENT
        else:
            assert rfc.other_address is not None  # _usable_other() picked it for having one
            result.mapping = _mapping_tests(result, main, rfc.other_address, deadline, timing)
        result.mapping_method = "rfc5780"
        result.filtering, result.hairpinning = _filtering_and_hairpin_tests(
            result, main, family, local_ip, deadline, filtering_timing(timing, result.rtt_max), hairpin
        )


def _no_rfc5780_reason(answered: list[ServerAnswer]) -> str:
    names = ", ".join(fmt_address(a.server) for a in answered)
    bad = [(a.server, a.other_address) for a in answered if a.other_address is not None]
    if bad:
        server, other = bad[0]
        return (
            f"no STUN server gave a usable OTHER-ADDRESS ({fmt_address(server)} gave "
            f"{fmt_address(other)}, which must differ in address and port): "
            "filtering behaviour cannot be tested"
        )
    return (
        f"STUN server(s) {names} do not support RFC 5780 (no OTHER-ADDRESS in their answers): "
        "filtering behaviour cannot be tested"
    )


def _mapping_from_servers(result: NatDiscovery, answered: list[ServerAnswer]) -> NatBehaviour:
    """Mapping behaviour from the addresses servers at different addresses saw for one socket."""
    if not result.nat_present:
        result.mapping_method = "two-servers"
        return NatBehaviour.ENDPOINT_INDEPENDENT
    by_ip: dict[str, ServerAnswer] = {}
    for a in answered:
        by_ip.setdefault(a.server[0], a)
    if len(by_ip) < 2:
        result.reasons.append("mapping needs answers from two STUN servers at different addresses")
        return NatBehaviour.UNKNOWN
    result.mapping_method = "two-servers"
    if len({a.mapped for a in by_ip.values()}) == 1:
        return NatBehaviour.ENDPOINT_INDEPENDENT
    return NatBehaviour.ENDPOINT_DEPENDENT


def _mapping_tests(
    result: NatDiscovery, main: socket.socket, other: Address, deadline: float, timing: Timing
) -> NatBehaviour:
    server = result.server
    # Test II: the other address, same port. Same mapping -> endpoint-independent.
    (second,) = run_transactions(
        [binding_transaction("mapping II", main, (other[0], server[1]), timing=timing)], deadline
    )
    result._record([second])
    if not second.ok or second.message is None or second.message.mapped is None:
        result.reasons.append(
            f"mapping: {describe_failure(second) if not second.ok else 'no mapped address in answer'}"
        )
        return NatBehaviour.UNKNOWN
    if second.message.mapped == result.mapped:
        return NatBehaviour.ENDPOINT_INDEPENDENT
    # Test III: other address and other port. Same as test II -> address-dependent.
    (third,) = run_transactions([binding_transaction("mapping III", main, other, timing=timing)], deadline)
    result._record([third])
    if not third.ok or third.message is None or third.message.mapped is None:
        result.reasons.append(
            f"mapping: {describe_failure(third) if not third.ok else 'no mapped address in answer'}"
        )
        return NatBehaviour.UNKNOWN
    if third.message.mapped == second.message.mapped:
        return NatBehaviour.ADDRESS_DEPENDENT
    return NatBehaviour.ADDRESS_AND_PORT_DEPENDENT


def _filtering_and_hairpin_tests(
    result: NatDiscovery,
    main: socket.socket,
    family: int,
    local_ip: str,
    deadline: float,
    timing: Timing,
    hairpin: bool,
) -> tuple[NatBehaviour, bool | None]:
    server = result.server
    other = result.other_address
    assert other is not None and result.mapped is not None
    socks: list[socket.socket] = []
    try:
        for _ in range(3 if hairpin and result.nat_present else 2):
            socks.append(udp_socket(family, local_ip))
    except OSError as exc:
        for s in socks:
            s.close()
        result.reasons.append(f"filtering: cannot open a socket: {exc.strerror or exc}")
        return NatBehaviour.UNKNOWN, None
    try:
        txns: list[Transaction] = [
            binding_transaction(
                "filtering II", socks[0], server, change_ip=True, change_port=True, timing=timing
            ),
            binding_transaction("filtering III", socks[1], server, change_port=True, timing=timing),
        ]
        if len(socks) == 3:
            # Hairpinning (RFC 5780 4.5): our request to our own mapped address must come
            # back, through the NAT, to the socket that owns that mapping.
            payload, tid = binding_request()
            txns.append(
                Transaction(
                    "hairpinning",
                    socks[2],
                    result.mapped,
                    payload,
                    tid,
                    HAIRPIN_TIMING,
                    recv_sock=main,
                    expect="request",
                )
            )
        outcomes = run_transactions(txns, deadline)
    finally:
        for s in socks:
            s.close()
    result._record(outcomes)
    f2, f3 = outcomes[0], outcomes[1]
    hairpinning: bool | None = None
    if len(outcomes) == 3:
        hp = outcomes[2]
        if hp.ok:
            hairpinning = True
        elif hp.timed_out or hp.unreachable:
            hairpinning = False
        else:
            result.reasons.append(f"hairpinning: {describe_failure(hp)}")
    elif result.nat_present is False:
        result.reasons.append("hairpinning: not applicable (no NAT)")
    return _filtering_verdict(result, f2, f3, server, other), hairpinning


def _filtering_verdict(
    result: NatDiscovery, f2: Outcome, f3: Outcome, server: Address, other: Address
) -> NatBehaviour:
    for o in (f2, f3):
        if o.error_code is not None:
            result.reasons.append(
                f"filtering: {fmt_address(server)} rejected CHANGE-REQUEST ({o.error}): "
                "filtering cannot be tested"
            )
            return NatBehaviour.UNKNOWN
    if f2.ok:
        if f2.source != other:
            result.reasons.append(
                "filtering: the answer to change-address-and-port came from "
                f"{fmt_address(f2.source or server)}, "
                f"not {fmt_address(other)} (the server ignores CHANGE-REQUEST)"
            )
            return NatBehaviour.UNKNOWN
        return NatBehaviour.ENDPOINT_INDEPENDENT
    if f3.ok:
        expected = (server[0], other[1])
        if f3.source != expected:
            result.reasons.append(
                f"filtering: the answer to change-port came from {fmt_address(f3.source or server)}, "
                f"not {fmt_address(expected)} (the server ignores CHANGE-REQUEST)"
            )
            return NatBehaviour.UNKNOWN
        return NatBehaviour.ADDRESS_DEPENDENT
    if f2.timed_out and f3.timed_out:
        return NatBehaviour.ADDRESS_AND_PORT_DEPENDENT
    for o in (f2, f3):
        if not o.ok and not o.timed_out:
            result.reasons.append(f"filtering: {describe_failure(o)}")
            break
    return NatBehaviour.UNKNOWN
