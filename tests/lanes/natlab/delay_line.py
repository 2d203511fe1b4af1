"""Added delay for the NAT lab without netem (this kernel has none): a userspace delay line.

Run inside a lab namespace: ``delay_line.py IN OUT DELAY_MS``. Every IP packet that the
namespace routes into TUN device IN is held DELAY_MS and then written to TUN device OUT, from
where the kernel routes it on as if it had just arrived. One queue and one delay for every
packet keep their order. It prints "ready" once both devices are attached, holds at most
MAX_HELD packets (more are dropped, as a full router queue would), and runs until killed.
"""

from __future__ import annotations

import collections
import fcntl
import os
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
MAX_HELD = 20_000
"""A 500 Mbps link holds ~2,000 full-size packets in 50 ms: ten times that is never reached
by the lab's traffic, and bounds the memory of one that runs away."""


def attach(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def main() -> None:
    source, sink, delay = attach(sys.argv[1]), attach(sys.argv[2]), float(sys.argv[3]) / 1000
    os.set_blocking(source, False)
    held: collections.deque[tuple[float, bytes]] = collections.deque()
    print("ready", flush=True)
    while True:
        wait = max(0.0, held[0][0] - time.monotonic()) if held else None
        if select.select([source], [], [], wait)[0]:
            due = time.monotonic() + delay
            while True:
                try:
                    packet = os.read(source, 65536)
                except BlockingIOError:
                    break
                if len(held) < MAX_HELD:
                    held.append((due, packet))
        now = time.monotonic()
        while held and held[0][0] <= now:
            os.write(sink, held.popleft()[1])


if __name__ == "__main__":
    main()
