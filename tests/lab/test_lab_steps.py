"""Budgeted set-up steps, timing records and lanes (tests/lab/steps.py, timing.py, lanes.py).

No lab needed: a step is any block of code, a playbook step is a real ansible-playbook run
against this machine's own local connection (a pause, nothing changed).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.lab import lanes, timing
from tests.lab.steps import StepOverBudget, Steps
from tests.lanes.profile import play


@pytest.fixture(autouse=True)
def own_timings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """These steps are demonstrations: keep them out of the run's own report."""
    path = tmp_path / "timings.jsonl"
    monkeypatch.setenv(timing.ENV, str(path))
    return path


def test_a_step_over_budget_names_itself_its_time_and_its_log(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    steps = Steps("demo fixture")
    with steps.step("boot", 5):
        pass
    with pytest.raises(StepOverBudget) as caught:
        with steps.step("converge", 0.3, log=log):
            time.sleep(5)
    message = str(caught.value)
    assert "demo fixture: step 'converge' ran past its budget: 0.3s of 0.3s" in message
    assert "steps before it: boot 0/5s" in message
    assert "line 99" in message and "line 59" not in message, "the last 40 lines, not the whole log"
    assert [name for name, _, _ in steps.done] == ["boot", "converge"]


def test_a_step_restores_an_alarm_armed_before_it() -> None:
    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.6)
        with Steps("demo").step("quick", 30):
            pass
        remaining = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 0 < remaining <= 0.6, "the outer alarm is armed again with what it had left"
        time.sleep(1.0)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_playbook_step_over_budget_shows_the_plays_output(tmp_path: Path) -> None:
    book = tmp_path / "pause.yml"
    book.write_text('- hosts: all\n  gather_facts: false\n  tasks:\n    - name: Wait for ever\n'
                    '      ansible.builtin.pause:\n        seconds: 120\n')
    steps = Steps("demo fixture")
    with pytest.raises(StepOverBudget) as caught:
        play.playbook_step(steps, "converge", 15, "localhost,", book, args=["-c", "local"])
    message = str(caught.value)
    assert "step 'converge' ran past its budget" in message and "(pause.yml)" in message
    assert "TASK [Wait for ever]" in message, message
    assert "[timed out after 15s]" in message


def test_timing_records_reach_the_file(own_timings: Path) -> None:
    path = own_timings
    timing.record_cache("rootfs trixie", "cold", 123.4, "abc")
    with Steps("demo").step("boot", 10):
        pass
    entries = timing.read(path)
    assert [(e["kind"], e["name"]) for e in entries] == [("cache", "rootfs trixie"), ("step", "demo: boot")]
    assert entries[0]["state"] == "cold" and entries[0]["seconds"] == 123.4 and entries[1]["budget"] == 10


LANE_MODULE = """
import pytest

@pytest.fixture(scope="module", params=["bookworm", "trixie"])
def suite(request):
    return request.param

@pytest.mark.vm
def test_private_vm():
    pass

@pytest.mark.nspawn
def test_lifecycle(suite):
    pass

@pytest.mark.nspawn
@pytest.mark.lab_cost(999)
def test_expensive():
    pass

def test_unit():
    pass
"""


def test_lanes_group_and_order_items(pytester: pytest.Pytester, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The order a worker reports, and the nodeid -> group map it leaves for the scheduler."""
    lanes_file = tmp_path / "lanes.json"
    monkeypatch.setenv(lanes.LANES_FILE, str(lanes_file))
    # configured as an xdist worker: only a worker writes the map
    pytester.makeconftest(
        "import pytest\n"
        "pytest_plugins = ['tests.lab.lanes']\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_configure(config):\n    config.workerinput = {}\n")
    pytester.makepyfile(test_lanes_demo=LANE_MODULE)
    pytester.makeini("[pytest]\nmarkers =\n    vm: x\n    nspawn: x\n")
    recorder = pytester.inline_run("--collect-only", "-p", "no:cacheprovider")
    items = recorder.getcall("pytest_collection_finish").session.items
    order = [(item.name, lanes.group(item)) for item in items]
    assert order == [
        ("test_private_vm", "vm"),  # the vm lane first
        ("test_expensive", "test_lanes_demo.py"),  # lab groups by cost; a module is one group
        ("test_unit", "test_lanes_demo.py"),
        ("test_lifecycle[bookworm]", "test_lanes_demo.py[bookworm]"),  # one group per module parameter
        ("test_lifecycle[trixie]", "test_lanes_demo.py[trixie]"),
    ], order

    written = json.loads(lanes_file.read_text())
    groups = written["groups"]
    assert groups["test_lanes_demo.py::test_lifecycle[trixie]"] == "test_lanes_demo.py[trixie]", groups
    assert groups["test_lanes_demo.py::test_private_vm"] == "vm"
    assert written["lanes"] == {"vm": "vm", "test_lanes_demo.py": "lab", "test_lanes_demo.py[bookworm]": "lab",
                                "test_lanes_demo.py[trixie]": "lab"}, written["lanes"]


SCHEDULED = """
import os, pytest

def record(name):
    with open(os.environ["ORDER_FILE"], "a") as f:
        f.write(name + "\\n")

@pytest.mark.{marker}
def test_{name}():
    record("{name}")
"""


@pytest.mark.parametrize("cache_pending", [False, True], ids=["cache ready", "cache being built"])
def test_the_scheduler_gives_unit_groups_first_while_the_lab_cache_is_built(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_pending: bool) -> None:
    """One xdist worker, real LaneScheduling: the vm group first when the cache is ready; while
    the pending file exists, every unit group before it."""
    order_file = tmp_path / "order"
    pending = tmp_path / "pending"
    if cache_pending:
        pending.touch()
    pytester.makeconftest("pytest_plugins = ['tests.lab.lanes']\n")
    pytester.makeini("[pytest]\nmarkers =\n    vm: x\n    unit: x\n")
    for name, marker in (("a_unit", "unit"), ("b_unit", "unit"), ("the_vm", "vm")):
        pytester.makepyfile(**{f"test_{name}": SCHEDULED.format(marker=marker, name=name)})
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", str(repo))
    monkeypatch.setenv("ORDER_FILE", str(order_file))
    monkeypatch.setenv(lanes.LAB_PENDING, str(pending))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1", "--dist", "loadgroup",
                                           "--no-loadscope-reorder")
    assert result.ret == 0, result.outlines
    order = order_file.read_text().split()
    assert sorted(order) == ["a_unit", "b_unit", "the_vm"], order
    assert order.index("the_vm") == (2 if cache_pending else 0), order
