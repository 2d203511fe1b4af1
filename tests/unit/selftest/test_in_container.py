"""`hostcheck selftest --in-container IMAGE`: the stages run inside a container started as a
renter's is, and come back as data. `docker` is the stand-in of docker_standin.py (it runs
the container's command on a bare interpreter with only the read-only volumes hostcheck
mounts); the driver inside is the C stand-in for libcuda. The real daemon starts the worker
in the lifecycle lab (tests/lanes/profile/test_profile_lifecycle.py)."""

from __future__ import annotations

import _thread
import copy
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hostcheck.commands.selftest import Deps, Request, execute
from hostcheck.exit_codes import EXIT_INTERRUPTED, EXIT_NOT_FEASIBLE
from hostcheck.facts import load_snapshot
from hostcheck.selftest import container
from hostcheck.selftest.results import Run
from hostcheck.selftest.rules import rules
from hostcheck.selftest.worker import BOOTSTRAP, FORMAT
from tests.unit.selftest import standins
from tests.unit.selftest.standins import XID_79, RecordedNvml

IMAGE = "vastai/test:self-test-v2-cuda-12.8"
MINUTES = 0.04


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return standins.build_fake_libcuda(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`docker` on PATH is the stand-in; the calls it got are in the returned directory's `calls`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(standins.HERE, 'docker_standin.py')} \"$@\"\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("HC_DOCKER_STATE", str(tmp_path))
    return tmp_path


def calls(state: Path) -> list[list[str]]:
    return [json.loads(line) for line in (state / "calls").read_text().splitlines()]


def deps(library: Path, progress: Any = None, kernel: list[str] | None = None) -> Deps:
    facts = load_snapshot(standins.SNAPSHOTS / "dedicated-4090.json")

    def no_driver_here() -> Any:
        raise AssertionError("the stages ran on the host, not in the container")

    return Deps(collect=lambda: copy.deepcopy(facts), nvml=RecordedNvml([standins.desktop_4090()]),
                driver=no_driver_here, kernel_lines=lambda since: kernel or [], confirm=lambda q: True,
                progress=progress or (lambda line: None), cuda_library=str(library))


def run(d: Deps, minutes: float = MINUTES) -> tuple[int, dict[str, Any]]:
    code, text, _ = execute(Request(minutes=minutes, max_temp=None, yes=True, accept_owner_risk=False,
                                    in_container=IMAGE), d, "json")
    return code, json.loads(text)


def stage(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return next(s["findings"] for s in doc["stages"] if s["stage"] == name)


def test_the_stages_run_inside_and_come_back(libcuda: Path, docker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_FAKE_CUDA", "total_mib=24564;free_mib=24180;name=NVIDIA GeForce RTX 4090;cc=89;sms=128;"
                       "h2d_gbps=24;d2h_gbps=25")
    seen: list[str] = []
    code, doc = run(deps(libcuda, progress=seen.append))
    assert doc["preflight"]["container"] == {"image": IMAGE, "started": True, "error": ""}
    assert doc["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090" and doc["released"], doc["answer"]
    share = rules()["vram_share"].value
    assert stage(doc, "vram")[0]["measured"] == round(int(24564 * 2**20 * share) // 4 * 4 / (24564 * 2**20), 3)
    assert stage(doc, "link")[0]["status"] == "pass" and stage(doc, "link")[0]["measured"] > rules()["pcie_bw_gbps"].value
    # the progress of the stages inside reaches the host's progress line
    assert any(line.startswith("VRAM: GPU 0") for line in seen) and any("sustained load" in line for line in seen)
    # the stand-in bare image has no NVML library: the load ran, but is not a pass without readings
    assert doc["answer"]["not_judged"] == ["load"], doc["answer"]
    assert code == EXIT_NOT_FEASIBLE
    argv = calls(docker)[0]
    image_at = argv.index(IMAGE)
    options = argv[:image_at]
    assert options[:2] == ["run", "--rm"] and ["--gpus", "all"] == options[options.index("--gpus"):][:2]
    assert ["--pull", "never"] == options[options.index("--pull"):][:2]
    assert ["--network", "none"] == options[options.index("--network"):][:2]
    assert ["--security-opt", "no-new-privileges"] == options[options.index("--security-opt"):][:2]
    mounts = [options[i + 1] for i, a in enumerate(options) if a == "--mount"]
    assert mounts and all(m.startswith("type=bind,") and m.endswith(",readonly") for m in mounts), mounts
    assert "-v" not in options
    assert argv[image_at + 1:image_at + 3] == ["-c", BOOTSTRAP]


def test_the_kernel_log_is_read_on_the_host(libcuda: Path, docker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A container cannot read the kernel's log: the host reads it for the run's window, and an
    Xid there fails the load stage as on the host."""
    monkeypatch.setenv("HC_FAKE_CUDA", "total_mib=24564;free_mib=24180")
    code, doc = run(deps(libcuda, kernel=[XID_79]))
    assert doc["answer"]["first_failed_stage"] == "load" and code == EXIT_NOT_FEASIBLE
    assert [(line["kind"], line["code"]) for line in doc["kernel_lines"]] == [("xid", 79)]


def test_a_card_that_cannot_give_the_vram_share_inside(libcuda: Path, docker: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_FAKE_CUDA", "total_mib=16384;free_mib=9000")
    code, text, event = execute(Request(minutes=MINUTES, max_temp=None, yes=True, accept_owner_risk=False,
                                        in_container=IMAGE), deps(libcuda), "json")
    doc = json.loads(text)
    assert doc["answer"]["first_failed_stage"] == "vram" and code == EXIT_NOT_FEASIBLE
    assert "CUDA_ERROR_OUT_OF_MEMORY" in json.dumps(stage(doc, "vram"))
    # what --watch-db stores says where the stages ran
    assert event is not None and event["in_container"] == IMAGE and event["first_failed_stage"] == "vram"


@pytest.mark.parametrize(("said", "fix"), [
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
     "install the NVIDIA Container Toolkit"),
    (f"docker: Error response from daemon: No such image: {IMAGE}.", f"docker pull {IMAGE}"),
])
def test_a_container_that_does_not_start_says_dockers_words(libcuda: Path, docker: Path, said: str, fix: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_DOCKER_SAY", f"125:{said}")
    code, doc = run(deps(libcuda))
    assert code == EXIT_NOT_FEASIBLE and not doc["gpus"]
    assert doc["answer"]["headline"].startswith(f"The container did not start through Docker with --gpus all: {said}")
    assert fix in doc["answer"]["headline"]
    assert doc["preflight"]["container"] == {"image": IMAGE, "started": False, "error": said}


def test_ctrl_c_stops_the_stages_inside_which_free_what_they_hold(libcuda: Path, docker: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_FAKE_CUDA", "total_mib=24564;free_mib=24180")

    def progress(line: str) -> None:  # Ctrl-C once the load runs inside
        if line.startswith("sustained load") and not pressed.is_set():
            pressed.set()
            threading.Timer(0.3, _thread.interrupt_main).start()

    pressed = threading.Event()
    code, doc = run(deps(libcuda, progress=progress), minutes=1)
    assert code == EXIT_INTERRUPTED and doc["stopped"] == "interrupted (Ctrl-C)"
    assert doc["released"] and doc["gpus"][0]["load"]["ran_s"] < 30
    assert ["kill", "--signal", "INT", f"hostcheck-selftest-{__import__('os').getpid()}"] in calls(docker)


def test_a_mount_source_with_a_comma_or_colon_stays_one_field() -> None:
    import csv

    bind = container._bind("/home/o,wner/venv:3/hostcheck", "/opt/hostcheck-selftest/hostcheck")
    assert next(csv.reader([bind])) == ["type=bind", "source=/home/o,wner/venv:3/hostcheck",
                                        "target=/opt/hostcheck-selftest/hostcheck", "readonly"]


def test_an_image_whose_python_is_too_old() -> None:
    old = subprocess.run([sys.executable, "-c", f"import sys; sys.version_info = (3, 8, 10); exec({BOOTSTRAP!r})",
                          "{}"], capture_output=True, timeout=30, check=True)
    outcome = container.read_result(0, old.stdout, "")
    assert outcome.started and outcome.run is None
    assert outcome.error == "the image has Python 3.8; the stages need 3.11 or newer"


def test_an_image_without_python3() -> None:
    said = 'docker: Error response from daemon: failed to create shim task: exec: "python3": executable file not found'
    outcome = container.read_result(127, b"", said)
    assert outcome.started and outcome.error.startswith("the image's python3 could not run the stages")


def _document(run: dict[str, Any]) -> bytes:
    return json.dumps({"format": FORMAT, "run": run}).encode() + b"\n"


@pytest.mark.parametrize(("out", "words"), [
    (b"x" * (container.MAX_OUTPUT + 1), "more than 16 MiB"),
    (b"not json\n", "gave no result"),
    (b"[" * 200_000 + b"\n", "gave no result"),
    (json.dumps({"format": "other", "run": {}}).encode(), "gave no result"),
    (_document({"started_at": "", "gpus": [{"index": 0, "total_bytes": "16 GiB"}]}), "run.gpus[].total_bytes: not an integer"),
    (_document({"started_at": "", "gpus": [{"index": 0, "owner": "me"}]}), "unknown keys ['owner']"),
    (_document({"started_at": "", "nccl_gbps": float("nan")}), "run.nccl_gbps: not a number"),
    (_document({"started_at": "", "gpus": [{"index": 0, "pcie_gen": [4]}]}), "not a list of 2"),
    (_document({"started_at": "", "peers": [{}] * 100_001}), "at most 100000 items"),
    (_document({"started_at": "", "released": "yes"}), "run.released: not true or false"),
    (_document({}), "run: missing started_at"),
    (_document({"started_at": "", "peers": [{"source": 0}]}), "run.peers[]: missing destination, peer_to_peer"),
    (b'{"format": "hostcheck-selftest-worker/1", "run": {"started_at": "", "seconds": Infinity}}', "not a number"),
])
def test_what_a_container_writes_is_input(out: bytes, words: str) -> None:
    outcome = container.read_result(0, out, "")
    assert outcome.run is None and words in outcome.error, outcome.error


def test_a_gpu_name_from_the_container_cannot_reach_the_terminal_raw() -> None:
    outcome = container.read_result(0, _document({"started_at": "", "gpus": [
        {"index": 0, "name": "RTX\x1b]0;owned\x07 4090" + "x" * 5000, "pcie_gen": [4, 4]}]}), "")
    assert outcome.run is not None
    gpu = outcome.run.gpus[0]
    assert len(gpu.name) == 2000 and gpu.pcie_gen == (4, 4)
    from hostcheck.render.formats import Kind, render
    from hostcheck.render.views import SelftestView
    from hostcheck.selftest.verdict import judge

    run_ = Run(started_at="", gpus=outcome.run.gpus)
    text = render(Kind.SELFTEST, SelftestView(run_, judge(run_)), "table")
    assert "\x1b" not in text and "\\x1b]0;owned\\x07" in text


def test_a_flood_on_stderr_is_read_in_bounded_pieces() -> None:
    """Megabytes without a line end: the result after it is still read, and without one the
    error carries only the tail of what was said."""
    flood = "import sys, json; sys.stderr.write('x' * (8 << 20)); sys.stderr.flush(); "
    outcome = container.run_worker([sys.executable, "-c", flood + (
        f"print(json.dumps({{'format': {FORMAT!r}, 'run': {{'started_at': ''}}}}))")], 30, lambda line: None)
    assert outcome.run is not None and not outcome.error
    silent = container.run_worker([sys.executable, "-c", flood + "sys.exit(1)"], 30, lambda line: None)
    assert silent.run is None and silent.error.startswith("the stages inside gave no result (status 1): x")
    assert len(silent.error) <= len("the stages inside gave no result (status 1): ") + container.ERROR_TAIL


def test_a_container_that_does_not_end_is_killed() -> None:
    outcome = container.run_worker([sys.executable, "-c", "import time; time.sleep(60)"], 1.0, lambda line: None)
    assert outcome.started and outcome.error.startswith("the container did not end within 1 s"), outcome.error


def test_an_option_is_never_taken_for_an_image() -> None:
    for image in ("--privileged", "", "a b", "x\x1b[2J", "y" * 300, "a;rm -rf /", "../x"):
        outcome = container.run_in_container(image, "{}", 1, lambda line: None)
        assert not outcome.started and outcome.error.startswith("not an image name"), image


def test_an_option_for_an_image_is_a_usage_error() -> None:
    from typer.testing import CliRunner

    from hostcheck.cli import app
    from hostcheck.exit_codes import EXIT_USAGE

    result = CliRunner().invoke(app, ["selftest", "--yes", "--in-container", "--privileged"])
    assert result.exit_code == EXIT_USAGE and "--in-container: not an image name: '--privileged'" in result.output


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                     max_leaves=30)
_REAL_KEYS = st.sampled_from(["started_at", "gpus", "peers", "load", "samples", "pcie_gen", "errors", "index",
                              "t", "nccl_gbps", "skipped", "released", "source", "xid_lines"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.dictionaries(_REAL_KEYS | st.text(max_size=8), _JSON, max_size=6)
       | st.fixed_dictionaries({"started_at": st.just(""), "gpus": st.lists(st.fixed_dictionaries(
           {"index": st.integers(-3, 70), "total_bytes": st.integers(-1, 1 << 40), "name": st.text(max_size=10)},
           optional={"load": st.fixed_dictionaries({"index": st.integers(0, 3)}, optional={
               "samples": st.lists(st.fixed_dictionaries({"t": st.floats(-10, 1e6)}, optional={
                   "sm_clock_mhz": st.integers(-5, 5000), "temperature_c": st.integers(-50, 200),
                   "power_w": st.floats(-1, 1000), "reasons": st.integers(0, 1 << 40)}), max_size=5)}),
               "h2d_gbps": st.floats(-1, 100), "pattern_errors": st.integers(-1, 10),
               "allocated_bytes": st.integers(-1, 1 << 40), "wanted_bytes": st.integers(-1, 1 << 40)}),
           max_size=3)}))
@example({"started_at": "", "gpus": [{"index": 0, "total_bytes": 0, "wanted_bytes": 0, "allocated_bytes": 0}]})
def test_no_container_output_makes_the_host_fail(run: dict[str, Any]) -> None:
    """Whatever a container prints as its run, the host reads a run or says why not: never an
    exception of its own."""
    document = json.dumps({"format": FORMAT, "run": run}).encode()
    outcome = container.read_result(0, document, "")
    assert (outcome.run is None) == bool(outcome.error)
    if outcome.run is not None:  # and what it measured is judged and shown like any run
        from hostcheck.render.formats import Kind, render
        from hostcheck.render.views import SelftestView
        from hostcheck.selftest.verdict import judge

        host_run = Run(started_at="2026-12-07T00:00:00+00:00")
        container.merge(host_run, outcome.run)
        view = SelftestView(host_run, judge(host_run))
        assert render(Kind.SELFTEST, view, "json") and render(Kind.SELFTEST, view, "table")
