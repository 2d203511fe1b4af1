"""NAT behaviour discovery (RFC 5780) on top of bounded STUN transactions.

Order matters. The mapping tests (section 4.3) run first, all on one socket. The filtering
tests (section 4.4) then run each on a fresh socket, so that an answer sent from the
server's other address cannot create state in the NAT that changes a later test (the
artefact that made pystun3 call ordinary routers "symmetric"). The two filtering tests and
the hairpinning test are independent of each other and run at the same time, which keeps
the worst case (a filtering NAT: both tests wait out their timeout) to one timeout.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

from hostcheck.netprobe.client import (
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
from hostcheck.netprobe.stun import Address, binding_request

# The same three words name mapping and filtering behaviours (RFC 4787).
EI = "endpoint-independent"
AD = "address-dependent"
APD = "address-and-port-dependent"
UNKNOWN = "unknown"


@dataclass
class NatDiscovery:
    """What RFC 5780 discovery found against one server."""

    server: Address
    mapping: str = UNKNOWN
    filtering: str = UNKNOWN
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
    server: Address,
    *,
    deadline: float,
    timing: Timing = DEFAULT_TIMING,
    hairpin: bool = True,
) -> NatDiscovery:
    """Classify the NAT between this host and ``server`` (an RFC 5780 STUN server).

    Never raises for network conditions and never runs past ``deadline``; anything it could
    not decide is "unknown" with the reason in ``reasons``.
    """
    started = time.monotonic()
    result = NatDiscovery(server)
    family = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    try:
        _discover(result, family, deadline, timing, hairpin)
    finally:
        result.duration_s = round(time.monotonic() - started, 3)
    return result


def _discover(result: NatDiscovery, family: int, deadline: float, timing: Timing, hairpin: bool) -> None:
    server = result.server
    try:
        local_ip = source_address(server, family)
        main = udp_socket(family, local_ip)
    except OSError as exc:
        result.reasons.append(f"no route to STUN server {fmt_address(server)}: {exc.strerror or exc}")
        return
    with main:
        result.local = (local_ip, main.getsockname()[1])
        # Mapping test I: our mapped address and the server's other address.
        (first,) = run_transactions([binding_transaction("mapping I", main, server, timing=timing)], deadline)
        result._record([first])
        if not first.ok or first.message is None:
            result.reasons.append(describe_failure(first))
            return
        msg = first.message
        if msg.mapped is None:
            result.reasons.append(f"{fmt_address(server)} answered without a mapped address")
            return
        result.mapped = msg.mapped
        result.nat_present = msg.mapped != result.local
        other = msg.other_address
        result.other_address = other
        if other is None:
            why = (
                f"STUN server {fmt_address(server)} does not support RFC 5780 (no OTHER-ADDRESS in "
                "its answer): mapping and filtering behaviour cannot be tested"
            )
            result.reasons.append(why)
            return
        if other[0] == server[0] or other[1] == server[1]:
            result.reasons.append(
                f"STUN server {fmt_address(server)} gave OTHER-ADDRESS {fmt_address(other)}, "
                "which must differ "
                "in address and port: mapping and filtering behaviour cannot be tested"
            )
            return
        if not result.nat_present:
            # Nothing translates our address: the mapping is trivially endpoint-independent.
            result.mapping = EI
        else:
            result.mapping = _mapping_tests(result, main, other, deadline, timing)
        result.filtering, result.hairpinning = _filtering_and_hairpin_tests(
            result, main, family, local_ip, deadline, filtering_timing(timing, result.rtt_max), hairpin
        )


def _mapping_tests(
    result: NatDiscovery, main: socket.socket, other: Address, deadline: float, timing: Timing
) -> str:
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
        return UNKNOWN
    if second.message.mapped == result.mapped:
        return EI
    # Test III: other address and other port. Same as test II -> address-dependent.
    (third,) = run_transactions([binding_transaction("mapping III", main, other, timing=timing)], deadline)
    result._record([third])
    if not third.ok or third.message is None or third.message.mapped is None:
        result.reasons.append(
            f"mapping: {describe_failure(third) if not third.ok else 'no mapped address in answer'}"
        )
        return UNKNOWN
    return AD if third.message.mapped == second.message.mapped else APD


def _filtering_and_hairpin_tests(
    result: NatDiscovery,
    main: socket.socket,
    family: int,
    local_ip: str,
    deadline: float,
    timing: Timing,
    hairpin: bool,
) -> tuple[str, bool | None]:
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
        return UNKNOWN, None
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
        elif hp.timed_out:
            hairpinning = False
        else:
            result.reasons.append(f"hairpinning: {describe_failure(hp)}")
    elif result.nat_present is False:
        result.reasons.append("hairpinning: not applicable (no NAT)")
    return _filtering_verdict(result, f2, f3, server, other), hairpinning


def _filtering_verdict(
    result: NatDiscovery, f2: Outcome, f3: Outcome, server: Address, other: Address
) -> str:
    for o in (f2, f3):
        if o.error_code is not None:
            result.reasons.append(
                f"filtering: {fmt_address(server)} rejected CHANGE-REQUEST ({o.error}): "
                "filtering cannot be tested"
            )
            return UNKNOWN
    if f2.ok:
        if f2.source != other:
            result.reasons.append(
                "filtering: the answer to change-address-and-port came from "
                f"{fmt_address(f2.source or server)}, "
                f"not {fmt_address(other)} (the server ignores CHANGE-REQUEST)"
            )
            return UNKNOWN
        return EI
    if f3.ok:
        expected = (server[0], other[1])
        if f3.source != expected:
            result.reasons.append(
                f"filtering: the answer to change-port came from {fmt_address(f3.source or server)}, "
                f"not {fmt_address(expected)} (the server ignores CHANGE-REQUEST)"
            )
            return UNKNOWN
        return AD
    if f2.timed_out and f3.timed_out:
        return APD
    for o in (f2, f3):
        if not o.ok and not o.timed_out:
            result.reasons.append(f"filtering: {describe_failure(o)}")
            break
    return UNKNOWN
