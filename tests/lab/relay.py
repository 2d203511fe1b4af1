"""SSH ProxyCommand: copy stdin/stdout to a TCP connection.

Run as ``nsenter --net=/run/netns/<hub> python3 -I -S relay.py HOST PORT``: the lab hosts'
addresses exist only inside the lab's hub namespace, so SSH from this machine reaches them
through this relay instead of through an interface or route added to the machine itself.
Standard library only, no site import: it starts in ~15 ms.
"""

import os
import selectors
import socket
import sys


def main() -> int:
    host, port = sys.argv[1], int(sys.argv[2])
    try:
        conn = socket.create_connection((host, port), timeout=5)
    except OSError as exc:
        sys.stderr.write(f"relay: {host}:{port}: {exc}\n")
        return 255
    conn.settimeout(None)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, "stdin")
    selector.register(conn, selectors.EVENT_READ, "conn")
    stdin_open = True
    while True:
        for key, _ in selector.select():
            if key.data == "stdin":
                data = os.read(0, 65536)
                if not data:
                    stdin_open = False
                    selector.unregister(0)
                    conn.shutdown(socket.SHUT_WR)
                else:
                    conn.sendall(data)
            else:
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    return 0
                view = memoryview(data)
                while view:
                    view = view[os.write(1, view):]
        if not stdin_open and not selector.get_map():
            return 0


if __name__ == "__main__":
    sys.exit(main())
