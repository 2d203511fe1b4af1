"""A misbehaving STUN server for the lab: counts what it receives, answers badly or not at all.

``python udp_responder.py MODE ADDRESS PORT [ERROR_CODE]``; MODE is ``silent`` (reads and
drops every packet) or ``error`` (answers every STUN request with ERROR-CODE, e.g. 420 or
500). On SIGTERM it prints ``{"received": N, "answered": M, "sources": K}`` and exits: the
tests count how many packets the client sent.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hostcheck.netprobe.stun_codec import CLASS_ERROR, decode_message, encode_message


def main() -> None:
    mode, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    code = int(sys.argv[4]) if len(sys.argv) > 4 else 420
    counts = {"received": 0, "answered": 0}
    sources: set[tuple[str, int]] = set()

    def report(*_: object) -> None:
        print(json.dumps({**counts, "sources": len(sources)}), flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, report)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((address, port))
    reason = {420: "Unknown Attribute", 500: "Server Error"}.get(code, "Error")
    while True:
        data, src = sock.recvfrom(2048)
        counts["received"] += 1
        sources.add(src)
        if mode != "error":
            continue
        try:
            request = decode_message(data)
        except ValueError:
            continue
        packet = encode_message(CLASS_ERROR, request.transaction_id, {"ERROR-CODE": (code, reason)})
        sock.sendto(packet, src)
        counts["answered"] += 1


if __name__ == "__main__":
    main()
