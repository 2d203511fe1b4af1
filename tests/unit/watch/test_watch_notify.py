"""Notifications through a real HTTP receiver on 127.0.0.1 (tests/webhook_receiver.py) standing
in for Uptime Kuma's push endpoint and a webhook (their documented request shapes), from the real
recorder whose network outage is made by a DNS responder on loopback that stops answering; and
receivers that answer 500, redirect or never answer."""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcheck.errors import InputError
from hostcheck.recording.store import read_recording
from hostcheck.watch.notify import Destination, Notifier, read_url_file
from hostcheck.watch.recorder import Recorder, WatchConfig
from tests.unit.watch.test_watch import StepClocks
from tests.watch_fixtures import DnsResponder
from tests.webhook_receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def url_file(tmp_path: Path, name: str, url: str, mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(url + "\n")
    os.chmod(path, mode)
    return path


def destination(tmp_path: Path, kind: str, url: str) -> Destination:
    return Destination(kind, read_url_file(url_file(tmp_path, kind, url), f"--notify-{kind}-file", insecure_http=True))


def wait_until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def run_outage(tmp_path: Path, notifier: Notifier, pattern: list[bool]) -> Recorder:
    """The real recorder, one sample per entry of ``pattern`` (True: the DNS target answers)."""
    dns = DnsResponder()
    (tmp_path / "boot_id").write_text("aaaaaaaa-0000-0000-0000-000000000001\n")
    clocks = StepClocks()
    config = WatchConfig(db=tmp_path / "w.db", interval_s=60, targets=[f"dns:127.0.0.1:{dns.port}"], probe_timeout_s=0.3,
                         journal_command=["journalctl", "--file", str(tmp_path / "none.journal")],
                         dpkg_log=tmp_path / "dpkg.log", nvml=None, boot_id_path=tmp_path / "boot_id",
                         container_mark=tmp_path / "no-mark", hooks=[notifier])
    rec = Recorder(config, clocks=clocks, log=lambda _m: None)
    try:
        rec.begin()
        for answers in pattern:
            dns.muted = not answers
            rec.step()
            clocks.advance(60)
    finally:
        dns.close()
    return rec


def test_one_start_and_one_end_message_to_kuma_and_the_webhook(tmp_path: Path, receiver: Receiver) -> None:
    kuma = destination(tmp_path, "kuma", f"{receiver.base}/api/push/s3cr3tPushToken?status=up&msg=OK&ping=")
    hook = destination(tmp_path, "webhook", f"{receiver.base}/hook")
    notifier = Notifier([kuma, hook], host="rig1")
    rec = run_outage(tmp_path, notifier, [True, True, False, False, False, True, True])
    wait_until(notifier.idle)
    rec.finish()
    pushes = [r for r in receiver.requests if r["method"] == "GET"]
    hooks = [json.loads(r["body"]) for r in receiver.requests if r["method"] == "POST"]
    assert all(r["type"] == "application/json" for r in receiver.requests if r["method"] == "POST")
    # Kuma's push: GET on the push URL's path with status, msg and an empty ping.
    queries = [urllib.parse.parse_qs(urllib.parse.urlsplit(p["path"]).query, keep_blank_values=True) for p in pushes]
    assert {urllib.parse.urlsplit(p["path"]).path for p in pushes} == {"/api/push/s3cr3tPushToken"}
    assert [q["status"] for q in queries] == [["up"], ["down"], ["up"]]
    assert all(q["ping"] == [""] and q["msg"][0] for q in queries)
    assert [h["event"] for h in hooks] == ["recorder_start", "outage_start", "outage_end"]
    start, end = hooks[1], hooks[2]
    assert start["status"] == "down" and start["detail"] == {"cause": "network"} and start["host"] == "rig1"
    # Down from the first failing sample to the first answering one: 3 samples of 60 s.
    assert end["status"] == "up" and end["detail"] == {"cause": "network", "seconds": 180.0}
    assert hooks[0]["detail"]["previous_stop"] == "nothing recorded before"
    assert not [e for e in read_recording(tmp_path / "w.db").events if e.kind == "notify"]


@pytest.mark.parametrize("mode", ["fail", "redirect", "hang"])
def test_a_bad_webhook_is_bounded_and_recorded_once(tmp_path: Path, mode: str) -> None:
    bad = Receiver(mode)
    try:
        hook = destination(tmp_path, "webhook", f"{bad.base}/hook")
        notifier = Notifier([hook], host=None, timeout_s=0.5, backoff_s=0.05, attempts=3)
        began = time.monotonic()
        rec = run_outage(tmp_path, notifier, [True, False, True])
        sampling = time.monotonic() - began
        # Three messages; each of at most 3 tries of at most 0.5 s plus the backoffs: bounded.
        wait_until(notifier.idle, timeout=3 * (3 * 0.5 + 0.15) + 5)
        rec.step()  # the next sample records what the sending thread found
        rec.finish()
    finally:
        bad.close()
    tries = {"fail": 3, "redirect": 1, "hang": 3}[mode]  # 500 is retried, a redirect is neither followed nor retried
    assert len(bad.requests) == 3 * tries
    assert len({r["path"] for r in bad.requests}) == 1
    assert sampling < 3 * 0.3 + 2.0, "sampling never waits for the webhook"
    notify = [e.detail for e in read_recording(tmp_path / "w.db").events if e.kind == "notify"]
    assert len(notify) == 1, notify
    assert notify[0]["ok"] is False and notify[0]["attempts"] == tries
    expected = {"fail": "HTTP 500", "redirect": "HTTP 302 redirect (not followed)", "hang": "timed out"}[mode]
    assert expected in notify[0]["error"]


def test_rate_limited_and_dropped_once(tmp_path: Path, receiver: Receiver) -> None:
    hook = destination(tmp_path, "webhook", f"{receiver.base}/hook")
    notifier = Notifier([hook], host=None, burst=2, refill_s=3600)
    # An outage that flaps: start, end, start, end... only the first two messages pass.
    rec = run_outage(tmp_path, notifier, [False, True, False, True, False, True])
    wait_until(notifier.idle)
    rec.step()
    rec.finish()
    assert len(receiver.requests) == 2
    notify = [e.detail for e in read_recording(tmp_path / "w.db").events if e.kind == "notify"]
    assert notify == [{"destination": "webhook", "ok": False, "error": "dropped: rate limit"}]



def test_drops_are_counted_once_while_earlier_messages_are_in_flight(tmp_path: Path) -> None:
    """A slow receiver (1 s an answer): the flaps after the burst are dropped while the first two
    messages are still being sent; their delivery must not take the later drops as its own."""
    slow = Receiver(delay_s=1.0)
    try:
        notifier = Notifier([destination(tmp_path, "webhook", f"{slow.base}/hook")], host=None, burst=2,
                            refill_s=3600)
        rec = run_outage(tmp_path, notifier, [False, True, False, True, False, True])
        wait_until(notifier.idle)
        rec.step()
        rec.finish()
    finally:
        slow.close()
    assert len(slow.requests) == 2
    notify = [e.detail for e in read_recording(tmp_path / "w.db").events if e.kind == "notify"]
    assert notify == [{"destination": "webhook", "ok": False, "error": "dropped: rate limit"}]

def test_url_files_must_be_private_and_https(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="chmod 600"):
        read_url_file(url_file(tmp_path, "open", "https://kuma.example/api/push/x", 0o644), "--notify-kuma-file", False)
    with pytest.raises(InputError, match="--insecure-http"):
        read_url_file(url_file(tmp_path, "plain", "http://kuma.example/api/push/x"), "--notify-kuma-file", False)
    with pytest.raises(InputError, match="one URL on one line"):
        read_url_file(url_file(tmp_path, "two", "https://a.example/x https://b.example/y"), "--notify-kuma-file", False)
    assert read_url_file(url_file(tmp_path, "good", "https://kuma.example/api/push/x"), "--notify-kuma-file", False).hostname == "kuma.example"


def test_the_cli_refuses_a_cleartext_url_and_keeps_the_url_off_the_command_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    plain = url_file(tmp_path, "hook", "http://127.0.0.1:9/hook")
    proc = subprocess.run([sys.executable, "-m", "hostcheck.cli", "watch", "--db", str(tmp_path / "w.db"), "--for", "60",
                           "--notify-webhook-file", str(plain)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--insecure-http" in proc.stderr and not (tmp_path / "w.db").exists()


def test_a_restart_says_how_the_run_before_it_ended(tmp_path: Path, receiver: Receiver) -> None:
    def first_message() -> dict[str, Any]:
        receiver.requests.clear()
        notifier = Notifier([destination(tmp_path, "webhook", f"{receiver.base}/hook")], host=None)
        rec = run_outage(tmp_path, notifier, [True])
        wait_until(notifier.idle)
        return {"rec": rec, "message": json.loads(receiver.requests[0]["body"])}

    killed = first_message()
    killed["rec"].writer.close()  # killed: no recorder_stop written
    killed["rec"].config.hooks[0].close()
    after_kill = first_message()
    assert after_kill["message"]["event"] == "recorder_start"
    assert after_kill["message"]["detail"]["previous_stop"].startswith("no stop recorded")
    after_kill["rec"].finish()  # a clean stop this time
    after_stop = first_message()
    assert after_stop["message"]["detail"]["previous_stop"] == "a clean stop (duration reached)"
    after_stop["rec"].finish()
