"""Bounded STUN transactions over plain UDP sockets.

Every request is sent at most ``1 + retransmissions`` times and waited for at most
``probe_timeout`` seconds, and never past the caller's deadline. An error response ends the
transaction at once (no resending: the loop that made pystun3 send ~85,000 packets/s).
Several transactions run at once in one ``selectors`` loop, each on its own socket or
sharing one, told apart by transaction id.

The send/receive loop, its ICMP error decoding and its timing are one module: they are one
job, and their bounds only hold together.
"""

from __future__ import annotations

import errno
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hostcheck.errors import StunDecodeError, StunMismatch
from hostcheck.netprobe.stun_codec import Address, StunMessage, binding_request, decode_message

MAX_DATAGRAM = 2048
DRAIN_PER_WAKEUP = 64

# linux/in.h, linux/in6.h, linux/errqueue.h: not all exported by Python's socket module.
IP_RECVERR = 11
IPV6_RECVERR = 25
MSG_ERRQUEUE = getattr(socket, "MSG_ERRQUEUE", 0x2000)
SO_EE_ORIGIN_ICMP = 2
SO_EE_ORIGIN_ICMP6 = 3
ICMP_DEST_UNREACH = 3
ICMP6_DST_UNREACH = 1
_ICMP_ERRNOS = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES}
_UNREACH_WORDS = {
    (ICMP_DEST_UNREACH, 0): "network unreachable",
    (ICMP_DEST_UNREACH, 1): "host unreachable",
    (ICMP_DEST_UNREACH, 3): "port unreachable",
    (ICMP_DEST_UNREACH, 13): "administratively prohibited",
    (ICMP6_DST_UNREACH, 0): "no route",
    (ICMP6_DST_UNREACH, 1): "administratively prohibited",
    (ICMP6_DST_UNREACH, 3): "address unreachable",
    (ICMP6_DST_UNREACH, 4): "port unreachable",
}


@dataclass(frozen=True)
class Timing:
    """Retransmission schedule of one STUN transaction.

    Sends at 0, rto, 3*rto, ... (RFC 8489 doubling), at most ``1 + retransmissions`` times,
    and gives up ``probe_timeout`` seconds after the first send.
    """

    rto: float = 0.5
    retransmissions: int = 2
    probe_timeout: float = 3.0


DEFAULT_TIMING = Timing()
HAIRPIN_TIMING = Timing(rto=0.25, retransmissions=1, probe_timeout=1.0)


@dataclass
class Outcome:
    """How one transaction ended."""

    name: str
    dest: Address
    ok: bool = False
    message: StunMessage | None = None
    source: Address | None = None
    error: str | None = None
    """Why it failed: "timeout", "error response 420 ...", "send failed: ..."."""
    error_code: int | None = None
    timed_out: bool = False
    unreachable: bool = False
    """An ICMP destination-unreachable ended it (the destination, or a router, refused)."""
    cut_short: bool = False
    """The overall deadline ended it before its own schedule did (no conclusion)."""
    sent: int = 0
    ignored: int = 0
    """Packets received on its socket that were not its answer (malformed or stray)."""
    rtt_s: float | None = None
    waited_s: float | None = None

    def summary(self) -> dict[str, object]:
        result = "ok" if self.ok else ("cut short" if self.cut_short else (self.error or "failed"))
        out: dict[str, object] = {
            "test": self.name,
            "to": f"{_fmt(self.dest)}",
            "result": result,
            "sent": self.sent,
        }
        if self.rtt_s is not None:
            out["rtt_ms"] = round(self.rtt_s * 1000, 1)
        if self.source is not None:
            out["from"] = _fmt(self.source)
        if self.message is not None and self.message.mapped is not None:
            out["mapped"] = _fmt(self.message.mapped)
        if self.ignored:
            out["ignored_packets"] = self.ignored
        return out


def _fmt(addr: Address) -> str:
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class Transaction:
    """One request: sent on ``sock`` to ``dest``; its answer is awaited on ``recv_sock``.

    ``expect`` is "response" (a normal Binding transaction) or "request" (the hairpinning
    test, where our own request comes back to another of our sockets).
    """

    name: str
    sock: socket.socket
    dest: Address
    payload: bytes
    tid: bytes
    timing: Timing = DEFAULT_TIMING
    recv_sock: socket.socket | None = None
    expect: str = "response"
    outcome: Outcome = field(init=False)
    _first: float | None = field(default=None, init=False)
    _last: float | None = field(default=None, init=False)
    _next: float = field(default=0.0, init=False)
    done: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.name, self.dest)
        if self.recv_sock is None:
            self.recv_sock = self.sock

    @property
    def max_sends(self) -> int:
        return 1 + max(0, self.timing.retransmissions)

    def give_up_at(self) -> float:
        assert self._first is not None
        return self._first + self.timing.probe_timeout

    def finish(self, **kw: object) -> None:
        for key, value in kw.items():
            setattr(self.outcome, key, value)
        self.done = True


def binding_transaction(
    name: str,
    sock: socket.socket,
    dest: Address,
    *,
    change_ip: bool = False,
    change_port: bool = False,
    timing: Timing = DEFAULT_TIMING,
) -> Transaction:
    payload, tid = binding_request(change_ip=change_ip, change_port=change_port)
    return Transaction(name, sock, dest, payload, tid, timing)


def run_transactions(
    txns: list[Transaction], deadline: float, stop: Callable[[list[Transaction]], bool] | None = None
) -> list[Outcome]:
    """Run transactions concurrently until each is answered, fails, or times out.

    ``stop`` (checked after every wakeup) may end the run early: transactions still open then
    end as "not waited for" (``cut_short``), with no conclusion drawn from them.
    """
    sel = selectors.DefaultSelector()
    try:
        for sock in {id(t.recv_sock): t.recv_sock for t in txns}.values():
            assert sock is not None
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ)
        for t in txns:
            t.sock.setblocking(False)
        while True:
            now = time.monotonic()
            pending = [t for t in txns if not t.done]
            if not pending:
                break
            wake = deadline
            for t in pending:
                _step(t, now, deadline, txns)
                if t.done:
                    continue
                if t._first is not None:
                    wake = min(wake, t.give_up_at())
                if t.outcome.sent < t.max_sends:
                    wake = min(wake, t._next)
            if all(t.done for t in txns):
                break
            if stop is not None and stop(txns):
                for t in txns:
                    if not t.done:
                        t.finish(error="not waited for (another server answered)", cut_short=True)
                break
            timeout = max(0.0, wake - time.monotonic())
            if stop is not None:
                timeout = min(timeout, 0.05)
            for key, _ in sel.select(timeout):
                _drain(key.fileobj, [t for t in txns if not t.done and t.recv_sock is key.fileobj])  # type: ignore[arg-type]
    finally:
        sel.close()
    return [t.outcome for t in txns]


def _step(t: Transaction, now: float, deadline: float, txns: list[Transaction]) -> None:
    if t._first is not None and now >= t.give_up_at():
        t.finish(error="timeout", timed_out=True, waited_s=round(now - t._first, 2))
        return
    if now >= deadline:
        # The overall budget, not this probe's own schedule, stopped it: no conclusion.
        t.finish(error="overall time budget ran out", cut_short=True)
        return
    if t.outcome.sent < t.max_sends and now >= t._next:
        try:
            t.sock.sendto(t.payload, t.dest)
        except BlockingIOError:
            t._next = now + 0.01
            return
        except OSError as exc:
            if exc.errno in _ICMP_ERRNOS:
                # A queued ICMP error surfaced on this send; it may answer another request
                # on the same socket. The error queue says whose; this send is tried again.
                _read_icmp_errors(t.sock, txns)
                return
            t.finish(error=f"send failed: {exc.strerror or exc}")
            return
        t.outcome.sent += 1
        if t._first is None:
            t._first = now
        t._last = now
        t._next = now + t.timing.rto * (2 ** (t.outcome.sent - 1))


def _drain(sock: socket.socket, txns: list[Transaction]) -> None:
    for _ in range(DRAIN_PER_WAKEUP):
        try:
            data, src = sock.recvfrom(MAX_DATAGRAM)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            # An ICMP error queued on the socket (IP_RECVERR): the error queue says which
            # request it answers; an unreachable destination ends that transaction at once.
            _read_icmp_errors(sock, txns)
            continue
        now = time.monotonic()
        source = (str(src[0]), int(src[1]))
        matched = False
        for t in txns:
            if t.done:
                continue
            try:
                msg = decode_message(data, t.tid)
            except StunMismatch:
                continue
            except StunDecodeError:
                break  # malformed: belongs to nobody
            matched = True
            _answer(t, msg, source, now)
            break
        if not matched:
            for t in txns:
                if not t.done:
                    t.outcome.ignored += 1
                    break


def parse_icmp_error(ancdata: list[tuple[int, int, bytes]]) -> tuple[str, int, int] | None:
    """(offender address, ICMP type, ICMP code) from IP_RECVERR/IPV6_RECVERR data, or None."""
    for level, ctype, data in ancdata:
        if len(data) < 16:
            continue
        v4 = level == socket.IPPROTO_IP and ctype == IP_RECVERR
        v6 = level == socket.IPPROTO_IPV6 and ctype == IPV6_RECVERR
        if not (v4 or v6):
            continue
        _errno, origin, icmp_type, icmp_code = struct.unpack("=IBBB", data[:7])
        if origin not in (SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6):
            continue
        # struct sock_extended_err (16 bytes) is followed by the offender's sockaddr.
        offender = data[16:]
        family = struct.unpack("=H", offender[:2])[0] if len(offender) >= 2 else 0
        if family == socket.AF_INET and len(offender) >= 8:
            return socket.inet_ntop(socket.AF_INET, offender[4:8]), icmp_type, icmp_code
        if family == socket.AF_INET6 and len(offender) >= 24:
            return socket.inet_ntop(socket.AF_INET6, offender[8:24]), icmp_type, icmp_code
        return "?", icmp_type, icmp_code
    return None


def _read_icmp_errors(sock: socket.socket, txns: list[Transaction]) -> None:
    for _ in range(DRAIN_PER_WAKEUP):
        try:
            data, anc, _flags, addr = sock.recvmsg(MAX_DATAGRAM, 512, MSG_ERRQUEUE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
        parsed = parse_icmp_error(anc)
        if parsed is None:
            continue
        offender, icmp_type, icmp_code = parsed
        if icmp_type not in (ICMP_DEST_UNREACH, ICMP6_DST_UNREACH):
            continue  # e.g. time exceeded on the way: the schedule decides
        # The queued datagram is our own request: its transaction id names the transaction.
        tid = bytes(data[8:20]) if len(data) >= 20 else None
        dest = (str(addr[0]), int(addr[1])) if addr else None
        words = _UNREACH_WORDS.get((icmp_type, icmp_code), f"ICMP type {icmp_type} code {icmp_code}")
        for t in txns:
            if t.done or t.sock is not sock:
                continue
            if (tid is not None and t.tid == tid) or (tid is None and dest == t.dest):
                waited = round(time.monotonic() - t._first, 2) if t._first is not None else None
                t.finish(error=f"{words} (ICMP from {offender})", unreachable=True, waited_s=waited)
                break


def _answer(t: Transaction, msg: StunMessage, source: Address, now: float) -> None:
    rtt = now - t._last if t._last is not None else None
    if t.expect == "request":
        if msg.is_request:
            t.finish(ok=True, message=msg, source=source, rtt_s=rtt)
        else:
            t.outcome.ignored += 1
        return
    if msg.is_error:
        code = msg.error_code
        t.finish(
            error=f"error response {code} {msg.error_reason}".rstrip(),
            error_code=code,
            message=msg,
            source=source,
            rtt_s=rtt,
        )
    elif msg.is_success:
        if msg.unknown_required:
            types = ", ".join(f"0x{x:04x}" for x in msg.unknown_required)
            t.finish(
                error=f"response with unknown comprehension-required attributes {types}",
                message=msg,
                source=source,
                rtt_s=rtt,
            )
        else:
            t.finish(ok=True, message=msg, source=source, rtt_s=rtt)
    else:
        t.outcome.ignored += 1  # a request or indication to us: not an answer


def udp_socket(family: int, local_ip: str) -> socket.socket:
    """A UDP socket on ``local_ip`` and a kernel-chosen (random) port.

    Binding to the real source address, not 0.0.0.0, is what lets "mapped equals local"
    mean "no NAT" (comparing against 0.0.0.0 is a classic false result).
    """
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        # ICMP errors for this unconnected socket are otherwise never reported to it.
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVERR, 1)
        else:
            sock.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        sock.bind((local_ip, 0))
    except OSError:
        sock.close()
        raise
    return sock


def source_address(dest: Address, family: int) -> str:
    """The local address the kernel would use to reach ``dest`` (no packet is sent)."""
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect(dest)
        return str(probe.getsockname()[0])


@dataclass
class BindingResult:
    """A single Binding transaction to one server."""

    server: Address
    local: Address | None = None
    mapped: Address | None = None
    outcome: Outcome | None = None
    error: str | None = None


def stun_binding(server: Address, *, deadline: float, timing: Timing = DEFAULT_TIMING) -> BindingResult:
    """Ask one server for our mapped address (plain RFC 5389 Binding)."""
    family = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    result = BindingResult(server)
    try:
        local_ip = source_address(server, family)
        sock = udp_socket(family, local_ip)
    except OSError as exc:
        result.error = f"no route to {_fmt(server)}: {exc.strerror or exc}"
        return result
    with sock:
        result.local = (local_ip, sock.getsockname()[1])
        (outcome,) = run_transactions([binding_transaction("binding", sock, server, timing=timing)], deadline)
    result.outcome = outcome
    if outcome.ok and outcome.message is not None and outcome.message.mapped is not None:
        result.mapped = outcome.message.mapped
    elif outcome.ok:
        result.error = f"{_fmt(server)} answered without a mapped address"
    else:
        result.error = describe_failure(outcome)
    return result


def describe_failure(outcome: Outcome) -> str:
    where = _fmt(outcome.dest)
    if outcome.cut_short and outcome.error and outcome.error.startswith("not waited for"):
        return f"no answer from {where} yet, {outcome.error} ({outcome.sent} sent)"
    if outcome.cut_short:
        return f"no answer from {where} before the overall time budget ran out ({outcome.sent} sent)"
    if outcome.timed_out:
        return f"no answer from {where} ({outcome.sent} requests in {outcome.waited_s:g} s)"
    if outcome.unreachable:
        return f"{where} is unreachable: {outcome.error}"
    return f"{where}: {outcome.error}"


fmt_address = _fmt
