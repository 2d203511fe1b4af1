"""Addresses replaced by addresses of the same scope (see :mod:`hostcheck.redact`).

Private, shared, link-local and unique-local addresses get a keyed, prefix-preserving
permutation of the bits after their block; global addresses become documentation addresses,
counted in order; addresses that identify nobody stay.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os

from hostcheck.redact.patterns import (
    GLOBAL_V4_BLOCKS,
    GLOBAL_V6_BLOCK,
    OTHER_V4_BLOCK,
    OTHER_V6_BLOCK,
    PERMUTED_BLOCKS,
    IPAddress,
    in_ranges,
    kept_address,
)


class AddressMap:
    """One replacement per address, the same for every notation and every host redacted."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else os.urandom(32)
        self.addresses: dict[IPAddress, IPAddress] = {}
        self.address_counts: dict[str, int] = {}
        self.public_ranges: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        """Ranges the facts say are public (network.path.public_ranges)."""
        self.substitute_blocks: set[str] = set()
        """Documentation blocks handed out as public addresses."""

    def address(self, address: IPAddress) -> IPAddress:
        """The same-scope replacement of one address (itself when it identifies nobody)."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            inner = self.address(address.ipv4_mapped)
            return ipaddress.IPv6Address(int(address) & ~0xFFFFFFFF | int(inner))
        if kept_address(address):
            return address
        if address not in self.addresses:
            self.addresses[address] = self._substitute(address)
        return self.addresses[address]

    def _substitute(self, address: IPAddress) -> IPAddress:
        if not in_ranges(address, self.public_ranges):
            for block in PERMUTED_BLOCKS:
                if address.version == block.version and address in block:
                    return self._permute(address, block.prefixlen)
        scope_global = in_ranges(address, self.public_ranges) or address.is_global
        count_key = f"{'global' if scope_global else 'other'}{address.version}"
        self.address_counts[count_key] = self.address_counts.get(count_key, 0) + 1
        number = self.address_counts[count_key]
        if address.version == 6:
            block6 = GLOBAL_V6_BLOCK if scope_global else OTHER_V6_BLOCK
            if scope_global:
                self.substitute_blocks.add(str(block6))
            return ipaddress.IPv6Address(int(block6.network_address) + number)
        if not scope_global:
            return ipaddress.IPv4Address(int(OTHER_V4_BLOCK.network_address) + number)
        for block4 in GLOBAL_V4_BLOCKS:  # skip each block's network and broadcast address
            usable = block4.num_addresses - 2
            if number <= usable:
                self.substitute_blocks.add(str(block4))
                return ipaddress.IPv4Address(int(block4.network_address) + number)
            number -= usable
        return ipaddress.IPv4Address(int(OTHER_V4_BLOCK.network_address) + number)  # beyond 131k addresses

    def _permute(self, address: IPAddress, keep: int) -> IPAddress:
        """Prefix-preserving (Crypto-PAn style): bit i flips by a keyed function of bits 0..i-1."""
        bits = address.max_prefixlen
        value = int(address)
        out = value
        for i in range(keep, bits):
            prefix = f"{address.version}/{i}/{value >> (bits - i) if i else 0}".encode()
            if hmac.new(self._key, prefix, hashlib.sha256).digest()[0] & 1:
                out ^= 1 << (bits - 1 - i)
        return type(address)(out)
