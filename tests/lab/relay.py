"""SSH ProxyCommand: copy stdin/stdout to a TCP connection.

Run as ``nsenter --net=/run/netns/<hub> python3 -I -S relay.py HOST PORT [LOG]``: the lab
hosts' addresses exist only inside the lab's hub namespace, so SSH from this machine reaches
them through this relay instead of through an interface or route added to the machine itself.
Standard library only, no site import: it starts in ~15 ms.

Errors go to stderr (ssh shows them) and are appended to LOG (the session folder's
``relay.log``): a backgrounded ssh master has no stderr any more, so start-failure
diagnostics read the relay's side from there.
"""

import os
import selectors
import socket
import sys
import time


def complain(message: str) -> None:
    try:
        sys.stderr.write(f"relay: {message}\n")
        sys.stderr.flush()
    except OSError:  # a backgrounded master's stderr may be gone
        pass
    if len(sys.argv) > 3 and sys.argv[3].endswith(".log"):
        try:
            with open(sys.argv[3], "a") as log:
                log.write(f"{time.strftime('%H:%M:%S')} pid {os.getpid()} {message}\n")
        except OSError:
            pass


def main() -> int:
    host, port = sys.argv[1], int(sys.argv[2])
    try:
        conn = socket.create_connection((host, port), timeout=5)
    except OSError as exc:
        complain(f"{host}:{port}: {exc}")
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
                except OSError as exc:
                    complain(f"{host}:{port}: {exc}")
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
