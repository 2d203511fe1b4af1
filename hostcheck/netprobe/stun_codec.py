"""STUN message codec (RFC 5389/8489, with the RFC 5780 attributes).

Requests are encoded with ``aioice.stun`` (a correct RFC 5389/8489 implementation). Responses
are decoded here with strict framing checks first — header, magic cookie, length, attribute
bounds, FINGERPRINT — and aioice's attribute decoders second, so that any malformed packet
from the network becomes a :class:`StunDecodeError`, never another exception. Not pystun3: it
speaks only RFC 3489 and loops forever on error responses.
"""

from __future__ import annotations

import binascii
import os
import struct
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from hostcheck.errors import StunDecodeError, StunMismatch


def _aioice() -> ModuleType:
    """aioice.stun, imported when a STUN message is first encoded or decoded: importing aioice
    brings its ICE and mDNS stack (dnspython), about a tenth of an offline audit's start-up."""
    from aioice import stun

    return stun


MAGIC_COOKIE = 0x2112A442
HEADER_LENGTH = 20
FINGERPRINT_XOR = 0x5354554E

METHOD_BINDING = 0x001
CLASS_REQUEST = 0x000
CLASS_SUCCESS = 0x100
CLASS_ERROR = 0x110

CHANGE_IP = 0x4
CHANGE_PORT = 0x2

ATTR_MAPPED_ADDRESS = 0x0001
ATTR_CHANGE_REQUEST = 0x0003
ATTR_ERROR_CODE = 0x0009
ATTR_UNKNOWN_ATTRIBUTES = 0x000A
ATTR_XOR_MAPPED_ADDRESS = 0x0020
ATTR_SOFTWARE = 0x8022
ATTR_FINGERPRINT = 0x8028
ATTR_RESPONSE_ORIGIN = 0x802B
ATTR_OTHER_ADDRESS = 0x802C
ATTR_MESSAGE_INTEGRITY = 0x0008
ATTR_MESSAGE_INTEGRITY_SHA256 = 0x001C

Address = tuple[str, int]


@dataclass(frozen=True)
class StunMessage:
    """A decoded STUN message: only what NAT discovery needs."""

    method: int
    msg_class: int
    transaction_id: bytes
    mapped: Address | None = None
    """XOR-MAPPED-ADDRESS, or MAPPED-ADDRESS from servers that send only that."""
    other_address: Address | None = None
    response_origin: Address | None = None
    error_code: int | None = None
    error_reason: str = ""
    change_request: int | None = None
    software: str | None = None
    unknown_required: tuple[int, ...] = ()
    """Comprehension-required attribute types (< 0x8000) this decoder does not know."""
    attributes: tuple[int, ...] = field(default=())
    """Types of every attribute present, in order (for diagnostics and tests)."""

    @property
    def is_success(self) -> bool:
        return self.msg_class == CLASS_SUCCESS

    @property
    def is_error(self) -> bool:
        return self.msg_class == CLASS_ERROR

    @property
    def is_request(self) -> bool:
        return self.msg_class == CLASS_REQUEST


def new_transaction_id() -> bytes:
    return os.urandom(12)


def binding_request(
    *, change_ip: bool = False, change_port: bool = False, transaction_id: bytes | None = None
) -> tuple[bytes, bytes]:
    """Encode a Binding request; returns ``(packet, transaction_id)``.

    CHANGE-REQUEST is only included when a change is asked for: an RFC 5389-only server
    would answer a request carrying it with error 420 (unknown attribute).
    """
    tid = transaction_id if transaction_id is not None else new_transaction_id()
    if len(tid) != 12:
        raise ValueError("a STUN transaction id is 12 bytes")
    flags = (CHANGE_IP if change_ip else 0) | (CHANGE_PORT if change_port else 0)
    return encode_message(CLASS_REQUEST, tid, {"CHANGE-REQUEST": flags} if flags else {}), tid


def encode_message(
    msg_class: int,
    transaction_id: bytes,
    attributes: dict[str, Any],
    *,
    fingerprint: bool = True,
) -> bytes:
    """Encode a Binding message of any class with aioice (requests here, answers in test servers)."""
    stun = _aioice()
    msg = stun.Message(stun.Method.BINDING, stun.Class(msg_class), transaction_id=transaction_id)
    msg.attributes.update(attributes)
    if fingerprint:
        msg.add_fingerprint()
    return bytes(msg)


def _address(value: bytes, tid: bytes, xor: bool) -> Address:
    try:
        if xor:
            host, port = _aioice().unpack_xor_address(value, tid)
        else:
            host, port = _aioice().unpack_address(value)
    except (ValueError, struct.error) as exc:
        raise StunDecodeError(f"malformed address attribute: {exc}") from None
    return str(host), int(port)


def decode_message(data: bytes, expected_tid: bytes | None = None) -> StunMessage:
    """Decode one STUN Binding message; every defect is a :class:`StunDecodeError`.

    With ``expected_tid``, a well-formed message of another transaction raises
    :class:`StunMismatch` (a late answer to an earlier request, or a stray packet).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise StunDecodeError("not bytes")
    data = bytes(data)
    if len(data) < HEADER_LENGTH:
        raise StunDecodeError(f"truncated: {len(data)} bytes, a STUN header is {HEADER_LENGTH}")
    msg_type, length, cookie = struct.unpack("!HHI", data[:8])
    tid = data[8:20]
    if msg_type & 0xC000:
        raise StunDecodeError("not a STUN message (first two bits are not zero)")
    if cookie != MAGIC_COOKIE:
        raise StunDecodeError(f"wrong magic cookie 0x{cookie:08x} (an RFC 3489 server, or not STUN)")
    if length % 4:
        raise StunDecodeError(f"message length {length} is not a multiple of 4")
    if HEADER_LENGTH + length != len(data):
        raise StunDecodeError(
            f"message length {length} does not match the {len(data) - HEADER_LENGTH} bytes after the header"
        )
    method = (msg_type & 0x000F) | ((msg_type & 0x00E0) >> 1) | ((msg_type & 0x3E00) >> 2)
    msg_class = msg_type & 0x0110
    if method != METHOD_BINDING:
        raise StunDecodeError(f"not a Binding message (method 0x{method:03x})")
    if expected_tid is not None and tid != expected_tid:
        raise StunMismatch("transaction id does not match")

    fields: dict[str, Any] = {}
    after_integrity = False
    seen: list[int] = []
    unknown: list[int] = []
    pos = HEADER_LENGTH
    while pos < len(data):
        if pos + 4 > len(data):
            raise StunDecodeError("truncated attribute header")
        attr_type, attr_len = struct.unpack("!HH", data[pos : pos + 4])
        end = pos + 4 + attr_len
        if end > len(data):
            raise StunDecodeError(f"attribute 0x{attr_type:04x} runs past the end of the message")
        value = data[pos + 4 : end]
        seen.append(attr_type)
        if attr_type == ATTR_FINGERPRINT:
            if attr_len != 4:
                raise StunDecodeError("FINGERPRINT is not 4 bytes")
            # The CRC covers the message up to the attribute, with the length field as sent.
            expected = binascii.crc32(data[:pos]) ^ FINGERPRINT_XOR
            if struct.unpack("!I", value)[0] != expected:
                raise StunDecodeError("FINGERPRINT does not match (corrupted message)")
            if end + (-attr_len % 4) != len(data):
                raise StunDecodeError("attributes follow FINGERPRINT")
            break
        if attr_type in (ATTR_MESSAGE_INTEGRITY, ATTR_MESSAGE_INTEGRITY_SHA256):
            # Nothing after it is authenticated; only FINGERPRINT may follow (RFC 8489 14.5).
            pos = end + (-attr_len % 4)
            after_integrity = True
            continue
        if after_integrity:
            pos = end + (-attr_len % 4)
            continue
        _decode_attribute(attr_type, value, tid, fields, unknown)
        pos = end + (-attr_len % 4)
    if pos > len(data):
        raise StunDecodeError("attribute padding runs past the end of the message")

    return StunMessage(
        method=method,
        msg_class=msg_class,
        transaction_id=tid,
        mapped=fields.get("xor_mapped") or fields.get("mapped"),
        other_address=fields.get("other_address"),
        response_origin=fields.get("response_origin"),
        error_code=fields.get("error_code"),
        error_reason=fields.get("error_reason", ""),
        change_request=fields.get("change_request"),
        software=fields.get("software"),
        unknown_required=tuple(unknown),
        attributes=tuple(seen),
    )


def _decode_attribute(
    attr_type: int, value: bytes, tid: bytes, fields: dict[str, Any], unknown: list[int]
) -> None:
    # Only the first of a repeated attribute counts (RFC 8489 section 14).
    if attr_type == ATTR_XOR_MAPPED_ADDRESS:
        fields.setdefault("xor_mapped", _address(value, tid, xor=True))
    elif attr_type == ATTR_MAPPED_ADDRESS:
        fields.setdefault("mapped", _address(value, tid, xor=False))
    elif attr_type == ATTR_OTHER_ADDRESS:
        fields.setdefault("other_address", _address(value, tid, xor=False))
    elif attr_type == ATTR_RESPONSE_ORIGIN:
        fields.setdefault("response_origin", _address(value, tid, xor=False))
    elif attr_type == ATTR_ERROR_CODE:
        if len(value) < 4:
            raise StunDecodeError("ERROR-CODE is shorter than 4 bytes")
        klass, number = value[2] & 0x07, value[3]
        if not 3 <= klass <= 6 or number > 99:
            raise StunDecodeError(f"ERROR-CODE out of range (class {klass}, number {number})")
        fields.setdefault("error_code", klass * 100 + number)
        fields.setdefault("error_reason", value[4:].decode("utf-8", errors="replace")[:128])
    elif attr_type == ATTR_CHANGE_REQUEST:
        if len(value) != 4:
            raise StunDecodeError("CHANGE-REQUEST is not 4 bytes")
        fields.setdefault("change_request", struct.unpack("!I", value)[0])
    elif attr_type == ATTR_SOFTWARE:
        fields.setdefault("software", value.decode("utf-8", errors="replace")[:128])
    elif (
        attr_type < 0x8000
        and attr_type not in _aioice().ATTRIBUTES_BY_TYPE
        and attr_type != ATTR_UNKNOWN_ATTRIBUTES
    ):
        unknown.append(attr_type)
    # Other known attributes and comprehension-optional ones (>= 0x8000) are ignored.

