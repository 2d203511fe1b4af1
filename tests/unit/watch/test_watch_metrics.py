"""`hostcheck watch --textfile`: the real recorder writing the metrics file after each sample,
its network outage made by a real DNS responder on loopback that stops answering; the file
linted by the real `promtool check metrics`, its values checked against rules written out here."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hostcheck.watch.metrics import CATALOG, Family, MetricDef, MetricsState, families
from hostcheck.watch.recorder import Recorder, WatchConfig
from hostcheck.watch.textfile import FILE_NAME, TextfileOutput, exposition
from tests.nvml_standin import laptop_3080ti
from tests.unit.watch.test_watch import StepClocks
from tests.watch_fixtures import CountingNvml, DnsResponder, journal_entry, write_journal

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) is not installed")
INTERVAL = 60.0
SAMPLE_RE = re.compile(r'^(?P<name>[a-z_]+)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The samples of an exposition: (name, labels) -> value (the test's own reading of the format)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        assert m, line
        labels = frozenset(LABEL_RE.findall(m.group("labels") or ""))
        out[(m.group("name"), labels)] = float(m.group("value"))
    return out


def value(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((f"hostcheck_watch_{name}", frozenset(labels.items())))


def lint(text: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)


def recorder(tmp_path: Path, clocks: StepClocks, target: str, textfile: Path, log: list[str], **kw: Any) -> Recorder:
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("aaaaaaaa-0000-0000-0000-000000000001\n")
    hook = TextfileOutput(textfile, tmp_path / "w.db", INTERVAL, log.append, clock=clocks.wall)
    journal = kw.pop("journal", tmp_path / "none.journal")
    config = WatchConfig(db=tmp_path / "w.db", interval_s=INTERVAL, targets=[target], probe_timeout_s=0.3,
                         journal_command=["journalctl", "--file", str(journal)], dpkg_log=tmp_path / "dpkg.log",
                         boot_id_path=boot_id, container_mark=tmp_path / "no-mark", hooks=[hook], **kw)
    return Recorder(config, clocks=clocks, log=log.append)


@needs_promtool
def test_an_outage_in_the_metrics_file_after_each_sample(tmp_path: Path) -> None:
    dns = DnsResponder()
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    clocks, log = StepClocks(), []
    nvml = CountingNvml(laptop_3080ti())
    rec = recorder(tmp_path, clocks, f"dns:127.0.0.1:{dns.port}", textfile, log, nvml=nvml)
    up_before, down, up_after = 3, 2, 1
    try:
        rec.begin()
        for n in range(up_before + down + up_after):
            dns.muted = up_before <= n < up_before + down
            nvml.violation_ns[1] += 6 * 10**9  # the thermal counter: 6 s more in each minute
            rec.step()
            samples = parse((textfile / FILE_NAME).read_text())
            # After every sample the file says what that sample found.
            assert value(samples, "up") == (0.0 if dns.muted else 1.0), n
            assert value(samples, "state", cause="network") == (1.0 if dns.muted else 0.0)
            assert value(samples, "last_sample_timestamp_seconds") == clocks.w
            clocks.advance(INTERVAL)
    finally:
        rec.finish()
        dns.close()
    text = (textfile / FILE_NAME).read_text()
    assert lint(text).returncode == 0, lint(text).stdout + lint(text).stderr
    samples = parse(text)
    # The rule: a down sample stands for its interval; the outage is the run of down samples.
    assert value(samples, "window_outages", window="1d", cause="network") == 1
    assert value(samples, "window_down_seconds", window="1d", cause="network") == down * INTERVAL
    observed = (up_before + down + up_after) * INTERVAL
    assert value(samples, "window_observed_seconds", window="30d") == observed
    assert value(samples, "window_uptime_ratio", window="7d") == pytest.approx((observed - down * INTERVAL) / observed)
    assert value(samples, "window_outages", window="1d", cause="power") == 0
    assert value(samples, "samples_total") == up_before + down + up_after
    assert value(samples, "current_up_seconds") == up_after * INTERVAL
    # Thermal slowdown: 6 s a sample, counted between consecutive samples (the first has no predecessor).
    assert value(samples, "gpu_throttled_seconds_total", gpu="0", reason="thermal") == 6.0 * (up_before + down + up_after - 1)
    assert value(samples, "gpu_temperature_celsius", gpu="0") == laptop_3080ti()["nvmlDeviceGetTemperature"]
    # Vast: no verdict on less than its minimum of a day of samples (six minutes here); Runpod: too
    # short for its 30 days.
    assert value(samples, "platform_threshold_ratio", rule="vast") == 0.90
    assert value(samples, "platform_verdict", rule="vast", verdict="unknown") == 1.0
    assert value(samples, "platform_verdict", rule="runpod", verdict="unknown") == 1.0
    assert value(samples, "platform_score_ratio", rule="runpod") is None
    assert value(samples, "gpu_out_of_service") == 0
    assert not [m for m in log if "textfile" in m]
    assert not list(textfile.glob(f".{FILE_NAME}*")), "no temporary file is left behind"


def test_an_xid_this_boot_is_a_fault_and_takes_the_gpu_out_of_service(tmp_path: Path) -> None:
    dns = DnsResponder()
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    clocks, log = StepClocks(), []
    journal = write_journal(tmp_path / "k.journal", [journal_entry(
        "aaaaaaaa000000000000000000000001", clocks.w - 60,
        "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")])
    rec = recorder(tmp_path, clocks, f"dns:127.0.0.1:{dns.port}", textfile, log, journal=journal,
                   nvml=CountingNvml(laptop_3080ti()))
    try:
        rec.begin()
        rec.step()
    finally:
        rec.finish()
        dns.close()
    samples = parse((textfile / FILE_NAME).read_text())
    assert value(samples, "gpu_faults_total", effect="out_of_service") == 1
    assert value(samples, "gpu_out_of_service") == 1
    assert value(samples, "state", cause="driver") == 1
    assert value(samples, "window_outages", window="1d", cause="driver") == 1


def test_a_missing_directory_is_said_once_and_recording_goes_on(tmp_path: Path) -> None:
    dns = DnsResponder()
    textfile = tmp_path / "missing"
    clocks, log = StepClocks(), []
    rec = recorder(tmp_path, clocks, f"dns:127.0.0.1:{dns.port}", textfile, log)
    try:
        for _ in range(3):
            rec.step()
            clocks.advance(INTERVAL)
        textfile.mkdir()  # the owner creates it: the file appears at the next sample, said once
        rec.step()
    finally:
        rec.finish()
        dns.close()
    said = [m for m in log if "--textfile" in m]
    assert len(said) == 2 and "no such directory" in said[0] and "recording goes on" in said[0], said
    assert "written again" in said[1]
    assert rec.samples_written == 4
    assert (textfile / FILE_NAME).exists()


def test_not_a_directory_is_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine\n")
    log: list[str] = []
    TextfileOutput(tmp_path / "file", tmp_path / "w.db", INTERVAL, log.append)
    assert log == [f"--textfile {tmp_path / 'file'}: not a directory; recording goes on without the metrics file"]
    assert (tmp_path / "file").read_text() == "mine\n"


@needs_promtool
@pytest.mark.parametrize("hostile", ['a"b', "back\\slash", "new\nline", '}\n# TYPE x counter\nx 1', "ünï €"])
def test_hostile_label_values_never_break_the_format(hostile: str) -> None:
    meta = MetricDef("hostcheck_watch_public_address_info", "gauge", "help with \\ and\nnewline", ("address",))
    fam = Family(meta)
    fam.add(1.0, address=hostile)
    text = exposition([fam])
    proc = lint(text)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len([ln for ln in text.splitlines() if not ln.startswith("#")]) == 1
    assert ("address", hostile.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")) in parse(text).popitem()[0][1]


def test_no_address_unless_asked() -> None:
    state = MetricsState(started_at=0.0, interval_s=60.0)
    state.add_events([("public_address", {"address": "203.0.113.7", "previous": None})], 0.0)
    assert "203.0.113.7" not in exposition(families(state))
    assert 'address="203.0.113.7"' in exposition(families(state, addresses=True))


def test_names_follow_prometheus_naming_rules() -> None:
    for meta in CATALOG:
        assert re.fullmatch(r"hostcheck_watch_[a-z][a-z0-9_]*", meta.name), meta.name
        assert meta.name.endswith("_total") == (meta.type == "counter"), meta.name
        assert not meta.name.startswith("DCGM_"), meta.name
        assert not re.search(r"_(minutes|hours|days|milliseconds|percent)(_|$)", meta.name), meta.name
        for label in meta.labels:
            assert re.fullmatch(r"[a-z][a-z_]*", label) and label not in ("instance", "job"), (meta.name, label)
    assert len({m.name for m in CATALOG}) == len(CATALOG)
