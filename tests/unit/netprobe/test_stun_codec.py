"""The STUN codec on canned packets, property tests of the decoder, and the bounded
transaction loop against tiny loopback servers (no root needed)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from aioice import stun as aioice_stun
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcheck.errors import StunDecodeError, StunMismatch
from hostcheck.netprobe import stun_codec
from hostcheck.netprobe.stun_client import Timing, binding_transaction, run_transactions, stun_binding
from hostcheck.netprobe.stun_codec import CLASS_ERROR, CLASS_SUCCESS, binding_request, decode_message, encode_message

TID = bytes(range(12))


def success(attrs: dict, tid: bytes = TID, fingerprint: bool = True) -> bytes:
    return encode_message(CLASS_SUCCESS, tid, attrs, fingerprint=fingerprint)


def with_raw_attribute(packet: bytes, attr_type: int, value: bytes) -> bytes:
    """Append a raw attribute (no FINGERPRINT) and fix the header length."""
    pad = b"\x00" * (-len(value) % 4)
    body = packet[20:] + struct.pack("!HH", attr_type, len(value)) + value + pad
    return packet[:2] + struct.pack("!H", len(body)) + packet[4:20] + body


FULL = success(
    {
        "XOR-MAPPED-ADDRESS": ("198.51.100.2", 40000),
        "RESPONSE-ORIGIN": ("203.0.113.10", 3478),
        "OTHER-ADDRESS": ("203.0.113.11", 3479),
        "SOFTWARE": "coturn",
    }
)


# -- canned packets ---------------------------------------------------------------------------


def test_full_success_response() -> None:
    msg = decode_message(FULL, TID)
    assert msg.is_success and not msg.is_error
    assert msg.mapped == ("198.51.100.2", 40000)
    assert msg.other_address == ("203.0.113.11", 3479)
    assert msg.response_origin == ("203.0.113.10", 3478)
    assert msg.software == "coturn"
    assert msg.attributes[-1] == stun_codec.ATTR_FINGERPRINT


def test_xor_mapped_address_wins_over_mapped_address() -> None:
    packet = success({"MAPPED-ADDRESS": ("10.0.0.1", 1), "XOR-MAPPED-ADDRESS": ("198.51.100.7", 5000)})
    assert decode_message(packet, TID).mapped == ("198.51.100.7", 5000)


def test_mapped_address_only_server() -> None:
    assert decode_message(success({"MAPPED-ADDRESS": ("198.51.100.9", 7)}), TID).mapped == (
        "198.51.100.9",
        7,
    )


def test_ipv6_xor_mapped_address() -> None:
    packet = success({"XOR-MAPPED-ADDRESS": ("2001:db8:1::10", 50000)})
    assert decode_message(packet, TID).mapped == ("2001:db8:1::10", 50000)


@pytest.mark.parametrize("cut", [0, 1, 19, 20, 21, 24, 31, len(FULL) - 1])
def test_truncated_packets_are_rejected(cut: int) -> None:
    with pytest.raises(StunDecodeError):
        decode_message(FULL[:cut], TID)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda p: p[:4] + b"\x00\x00\x00\x00" + p[8:], "magic cookie"),
        (lambda p: b"\xc1" + p[1:], "first two bits"),
        (lambda p: p[:2] + struct.pack("!H", struct.unpack("!H", p[2:4])[0] + 2) + p[4:], "multiple of 4"),
        (lambda p: p[:2] + struct.pack("!H", struct.unpack("!H", p[2:4])[0] + 4) + p[4:], "does not match"),
        (lambda p: p[:-1] + bytes([p[-1] ^ 1]), "FINGERPRINT does not match"),
        (lambda p: b"\x00\x03" + p[2:], "not a Binding"),  # Allocate
    ],
    ids=[
        "wrong-cookie",
        "not-stun",
        "length-not-aligned",
        "length-too-long",
        "bad-fingerprint",
        "other-method",
    ],
)
def test_malformed_headers(mutate: Callable[[bytes], bytes], match: str) -> None:
    with pytest.raises(StunDecodeError, match=match):
        decode_message(mutate(FULL), TID)


def test_wrong_transaction_id_is_a_mismatch() -> None:
    with pytest.raises(StunMismatch):
        decode_message(FULL, b"\xff" * 12)
    # Without an expected id the same packet decodes.
    assert decode_message(FULL).transaction_id == TID


def test_attribute_running_past_the_end() -> None:
    packet = success({"XOR-MAPPED-ADDRESS": ("198.51.100.2", 1)}, fingerprint=False)
    broken = packet[:22] + struct.pack("!H", 200) + packet[24:]
    with pytest.raises(StunDecodeError, match="runs past the end"):
        decode_message(broken, TID)


def test_attribute_after_fingerprint_is_rejected() -> None:
    packet = with_raw_attribute(FULL, 0x8050, b"late")
    with pytest.raises(StunDecodeError):
        decode_message(packet, TID)


def test_malformed_address_attribute() -> None:
    packet = with_raw_attribute(success({}, fingerprint=False), 0x0020, b"\x00\x01\x00")
    with pytest.raises(StunDecodeError, match="malformed address"):
        decode_message(packet, TID)


def test_unknown_comprehension_optional_attribute_is_ignored() -> None:
    packet = with_raw_attribute(
        success({"XOR-MAPPED-ADDRESS": ("198.51.100.2", 9)}, fingerprint=False), 0x8077, b"x"
    )
    msg = decode_message(packet, TID)
    assert msg.mapped == ("198.51.100.2", 9) and msg.unknown_required == ()


def test_unknown_comprehension_required_attribute_is_reported() -> None:
    packet = with_raw_attribute(
        success({"XOR-MAPPED-ADDRESS": ("198.51.100.2", 9)}, fingerprint=False), 0x7F01, b"abcd"
    )
    assert decode_message(packet, TID).unknown_required == (0x7F01,)


def test_attributes_after_message_integrity_are_not_trusted() -> None:
    packet = success({}, fingerprint=False)
    packet = with_raw_attribute(packet, 0x0008, b"\x00" * 20)
    packet = with_raw_attribute(packet, 0x0020, b"\x00\x01" + b"\x00" * 6)
    assert decode_message(packet, TID).mapped is None


@pytest.mark.parametrize(
    "code, reason", [(420, "Unknown Attribute"), (500, "Server Error"), (300, "Try Alternate")]
)
def test_error_codes(code: int, reason: str) -> None:
    packet = encode_message(CLASS_ERROR, TID, {"ERROR-CODE": (code, reason)})
    msg = decode_message(packet, TID)
    assert msg.is_error and msg.error_code == code and msg.error_reason == reason


def test_error_response_with_unknown_required_attribute_still_decodes() -> None:
    packet = with_raw_attribute(
        encode_message(CLASS_ERROR, TID, {"ERROR-CODE": (420, "Unknown Attribute")}, fingerprint=False),
        0x7F02,
        b"",
    )
    assert decode_message(packet, TID).error_code == 420


@pytest.mark.parametrize(
    "value", [b"\x00\x00\x07\x00", b"\x00\x00\x04\x64", b"\x00\x00\x02\x00", b"\x00\x00"]
)
def test_bad_error_code_attribute(value: bytes) -> None:
    packet = with_raw_attribute(encode_message(CLASS_ERROR, TID, {}, fingerprint=False), 0x0009, value)
    with pytest.raises(StunDecodeError, match="ERROR-CODE"):
        decode_message(packet, TID)


def test_requests_decode_as_requests() -> None:
    request, tid = binding_request()
    msg = decode_message(request, tid)
    assert msg.is_request and not msg.is_success and not msg.is_error


@pytest.mark.parametrize(
    "change_ip, change_port, flags", [(False, False, None), (True, True, 6), (False, True, 2)]
)
def test_binding_request_encoding(change_ip: bool, change_port: bool, flags: int | None) -> None:
    packet, tid = binding_request(change_ip=change_ip, change_port=change_port)
    assert packet[:2] == b"\x00\x01" and packet[4:8] == b"\x21\x12\xa4\x42" and packet[8:20] == tid
    parsed = aioice_stun.parse_message(packet)  # an independent decoder agrees
    assert parsed.attributes.get("CHANGE-REQUEST") == flags
    assert "FINGERPRINT" in parsed.attributes
    assert decode_message(packet, tid).change_request == flags


def test_transaction_ids_are_random() -> None:
    assert len({binding_request()[1] for _ in range(50)}) == 50


# -- properties --------------------------------------------------------------------------------


@given(st.binary(max_size=300))
@settings(max_examples=400)
def test_decoder_never_raises_anything_but_decode_errors(data: bytes) -> None:
    try:
        decode_message(data, TID)
    except StunDecodeError:
        pass


@given(st.binary(min_size=20, max_size=200), st.integers(min_value=0, max_value=0xFFFF))
@settings(max_examples=300)
def test_decoder_on_stun_shaped_garbage(body: bytes, msg_type: int) -> None:
    body = body[: len(body) - len(body) % 4]
    packet = struct.pack("!HHI", msg_type & 0x3FFF, len(body), stun_codec.MAGIC_COOKIE) + TID + body
    try:
        decode_message(packet, TID)
    except StunDecodeError:
        pass


@given(st.data())
@settings(max_examples=300)
def test_decoder_on_corrupted_valid_packets(data: st.DataObject) -> None:
    packet = bytearray(FULL)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(packet) - 1))
        packet[i] = data.draw(st.integers(0, 255))
    try:
        msg = decode_message(bytes(packet), TID)
    except StunDecodeError:
        return
    assert msg.method == stun_codec.METHOD_BINDING


addresses = st.one_of(st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(str))


@given(
    addresses, st.integers(0, 65535), st.binary(min_size=12, max_size=12), addresses, st.integers(0, 65535)
)
@settings(max_examples=300)
def test_round_trip_with_aioice_encoder(host: str, port: int, tid: bytes, other: str, oport: int) -> None:
    packet = success({"XOR-MAPPED-ADDRESS": (host, port), "OTHER-ADDRESS": (other, oport)}, tid=tid)
    msg = decode_message(packet, tid)
    assert msg.mapped == (host, port)
    assert msg.other_address == (other, oport)


# -- the transaction loop against loopback servers -------------------------------------------------


class Responder:
    """A loopback UDP server: ``answer(data) -> bytes | None``; counts what it receives."""

    def __init__(self, answer: Callable[[bytes], list[bytes]]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.addr = self.sock.getsockname()
        self.received = 0
        self.answer = answer
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                data, src = self.sock.recvfrom(2048)
            except TimeoutError:
                continue
            except OSError:
                return
            self.received += 1
            for reply in self.answer(data):
                self.sock.sendto(reply, src)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(1)
        self.sock.close()


@pytest.fixture
def responder() -> Iterator[Callable[[Callable[[bytes], list[bytes]]], Responder]]:
    made: list[Responder] = []

    def make(answer: Callable[[bytes], list[bytes]]) -> Responder:
        r = Responder(answer)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def _tid(data: bytes) -> bytes:
    return data[8:20]


FAST = Timing(rto=0.1, retransmissions=2, probe_timeout=0.6)


def test_error_response_is_final(responder: Callable[..., Responder]) -> None:
    srv = responder(lambda d: [encode_message(CLASS_ERROR, _tid(d), {"ERROR-CODE": (500, "Server Error")})])
    result = stun_binding(srv.addr, deadline=time.monotonic() + 5, timing=FAST)
    time.sleep(0.4)  # a retransmission would have arrived by now
    assert srv.received == 1
    assert result.outcome is not None and result.outcome.sent == 1
    assert result.error and "error response 500" in result.error


def test_silence_costs_the_schedule_and_no_more(responder: Callable[..., Responder]) -> None:
    srv = responder(lambda d: [])
    started = time.monotonic()
    result = stun_binding(srv.addr, deadline=started + 5, timing=FAST)
    elapsed = time.monotonic() - started
    assert srv.received == 3 and result.outcome is not None and result.outcome.timed_out
    assert 0.55 <= elapsed < 0.9


def test_overall_deadline_cuts_short(responder: Callable[..., Responder]) -> None:
    srv = responder(lambda d: [])
    started = time.monotonic()
    result = stun_binding(srv.addr, deadline=started + 0.15, timing=Timing())
    assert time.monotonic() - started < 0.4
    assert result.outcome is not None and result.outcome.cut_short and not result.outcome.timed_out
    assert "overall time budget" in (result.error or "")


def test_stray_and_malformed_packets_are_ignored(responder: Callable[..., Responder]) -> None:
    def answer(d: bytes) -> list[bytes]:
        good = success({"XOR-MAPPED-ADDRESS": ("127.0.0.1", 4242)}, tid=_tid(d))
        stray = success({"XOR-MAPPED-ADDRESS": ("10.9.9.9", 1)}, tid=b"\xee" * 12)
        return [b"garbage", good[:-3], stray, good]

    srv = responder(answer)
    result = stun_binding(srv.addr, deadline=time.monotonic() + 5, timing=FAST)
    assert result.mapped == ("127.0.0.1", 4242)
    assert result.outcome is not None and result.outcome.ignored == 3 and result.outcome.sent == 1


def test_a_request_is_not_taken_for_the_answer(responder: Callable[..., Responder]) -> None:
    def answer(d: bytes) -> list[bytes]:
        good = success({"XOR-MAPPED-ADDRESS": ("127.0.0.1", 4242)}, tid=_tid(d))
        return [d, good]  # the request itself, echoed with its transaction id, then the answer

    srv = responder(answer)
    result = stun_binding(srv.addr, deadline=time.monotonic() + 5, timing=FAST)
    assert result.mapped == ("127.0.0.1", 4242)
    assert result.outcome is not None and result.outcome.ignored == 1 and result.outcome.sent == 1


def test_unknown_required_attribute_fails_the_transaction(responder: Callable[..., Responder]) -> None:
    def answer(d: bytes) -> list[bytes]:
        packet = success({"XOR-MAPPED-ADDRESS": ("127.0.0.1", 1)}, tid=_tid(d), fingerprint=False)
        return [with_raw_attribute(packet, 0x7F01, b"")]

    srv = responder(answer)
    result = stun_binding(srv.addr, deadline=time.monotonic() + 5, timing=FAST)
    assert result.mapped is None and "comprehension-required" in (result.error or "")
    assert srv.received == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=64), max_size=5))
def test_garbage_answers_never_crash_the_loop(
    responder: Callable[..., Responder], replies: list[bytes]
) -> None:
    srv = responder(lambda d: replies)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    with sock:
        (outcome,) = run_transactions(
            [
                binding_transaction(
                    "t", sock, srv.addr, timing=Timing(rto=0.05, retransmissions=1, probe_timeout=0.15)
                )
            ],
            time.monotonic() + 1,
        )
    assert not outcome.ok and outcome.sent <= 2
