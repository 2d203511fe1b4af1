"""A real headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
file descriptors 3 and 4, JSON messages ended by NUL), with the standard library only.

One browser per session, one tab, each page opened in turn: what it requested over the network,
which scripts the page itself ran (every script V8 compiles is announced to the debugger; the
ones this driver evaluates have no URL), what the console said, its layout width, a screenshot.
The browser is offline: every host name resolves to nothing, no proxy, no background traffic.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium")
TIMEOUT_S = 30.0


@dataclass
class PageVisit:
    url: str
    requests: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)  # url: why the browser stopped it before sending
    page_scripts: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""


class Browser:
    def __init__(self, width: int = 360, height: int = 800) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed (scripts/test installs it)")
        self.profile = tempfile.mkdtemp(prefix="hostcheck-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Copies above the low numbers, so that moving them to 3 and 4 in the child clobbers neither.
        high_r, high_w = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 100), fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 100)

        def fds() -> None:  # in the child, before exec: the pipe ends chromium expects
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--disable-default-apps", "--metrics-recording-only",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--no-proxy-server", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, pass_fds=(3, 4), preexec_fn=fds)
        for fd in (to_child_r, from_child_w, high_r, high_w):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for method in ("Page.enable", "Network.enable", "Runtime.enable", "Debugger.enable", "Log.enable"):
                self.call(method, session=True)
            self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                      deviceScaleFactor=1, mobile=True)
        except BaseException:
            self.close()  # a browser that did not start is not left running
            raise

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        for i, event in enumerate(self.events):
            if event["method"] == method:
                return self.events.pop(i)
        while True:
            reply = self._read(deadline)
            if reply.get("method") == method:
                return reply
            if "method" in reply:
                self.events.append(reply)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def visit(self, path: Path, expressions: dict[str, str], screenshot_height: int = 2400) -> PageVisit:
        """Open ``path``, wait for its load, read ``expressions``, take a screenshot of its top
        ``screenshot_height`` pixels (0: none)."""
        self.events.clear()
        url = path.resolve().as_uri()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")
        visit = PageVisit(url)
        visit.values = {name: self.evaluate(expr) for name, expr in expressions.items()}
        if screenshot_height:
            metrics = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": metrics["width"], "height": min(metrics["height"], screenshot_height),
                    "scale": 1}
            shot = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True, clip=clip)
            visit.screenshot = base64.b64decode(shot["data"])
        urls: dict[str, str] = {}
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Network.requestWillBeSent":
                visit.requests.append(params["request"]["url"])
                urls[params["requestId"]] = params["request"]["url"]
            elif event["method"] == "Network.loadingFailed" and params.get("blockedReason"):
                visit.blocked[urls.get(params["requestId"], "?")] = params["blockedReason"]
            elif event["method"] == "Debugger.scriptParsed" and params.get("url"):
                visit.page_scripts.append(params["url"])
            elif event["method"] == "Log.entryAdded":
                visit.console.append(params["entry"].get("text", ""))
            elif event["method"] == "Runtime.consoleAPICalled":
                visit.console.append(str(params.get("args")))
        return visit

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self.profile, ignore_errors=True)
