"""The self-test refuses, with the reason, where loading the GPU would harm what runs on the
machine or its owner: a rental or provider container running, another program on the GPU, on
battery, owner risk high without --accept-owner-risk. Stand-ins: the facts a live collection
records (recorded snapshots, with the container the Docker API would list added), and NVML's
process list. It starts nothing on the GPU when it refuses (the driver is never loaded)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from hostcheck.commands.selftest import Deps, Request, execute
from hostcheck.exit_codes import EXIT_NOT_FEASIBLE
from hostcheck.facts import load_snapshot
from tests.unit.collectors.test_collectors_isolation import docker_env, fake_docker_daemon  # noqa: F401
from tests.unit.selftest import standins
from tests.unit.selftest.standins import RecordedNvml


def refused(snapshot: str, *, change: Any = None, processes: list[Any] | None = None, accept: bool = False,
            confirm: bool = True, yes: bool = True) -> tuple[int, str]:
    facts = load_snapshot(standins.SNAPSHOTS / snapshot)
    if change:
        change(facts)
    spec = standins.desktop_4090()
    if processes is not None:
        spec["nvmlDeviceGetComputeRunningProcesses"] = processes

    def no_driver() -> Any:
        raise AssertionError("the driver was loaded although the self-test refused")

    deps = Deps(collect=lambda: copy.deepcopy(facts), nvml=RecordedNvml([spec]), driver=no_driver,
                kernel_lines=lambda since: [], confirm=lambda q: confirm, progress=lambda line: None)
    code, text, event = execute(Request(minutes=1, max_temp=None, yes=yes, accept_owner_risk=accept), deps,
                                "table")
    assert event is None
    return code, text


def add_container(name: str, image: str) -> Any:
    def change(facts: dict[str, Any]) -> None:
        facts["docker"]["containers"] = [*facts["docker"].get("containers", []),
                                         {"name": name, "image": image, "network_mode": "bridge"}]
    return change


@pytest.mark.parametrize(("name", "image"), [
    ("C.18472211", "vastai/pytorch:2.5.1-cuda-12.4"),  # a Vast rental, by its container's name
    ("eager_hopper", "ionetcontainers/io-worker-vc:latest"),  # io.net's worker, by its catalogued image
])
def test_a_rental_or_provider_container(name: str, image: str) -> None:
    code, text = refused("dedicated-4090.json", change=add_container(name, image))
    assert code == EXIT_NOT_FEASIBLE
    assert text.startswith("hostcheck selftest did not start:\n")
    assert f"a rental or provider container is running ({name} ({image}))" in text


def test_a_refusal_never_writes_a_container_image_raw_to_the_terminal() -> None:
    """A container's image is whatever its starter named it; the reason shows it escaped."""
    code, text = refused("dedicated-4090.json", change=add_container("C.77", "evil\x1b]0;owned\x07:latest"))
    assert code == EXIT_NOT_FEASIBLE
    assert "\x1b" not in text and "(C.77 (evil\\x1b]0;owned\\x07:latest))" in text


def test_another_program_on_the_gpu() -> None:
    from types import SimpleNamespace

    code, text = refused("dedicated-4090.json", processes=[SimpleNamespace(pid=4242, usedGpuMemory=2 << 30)])
    assert code == EXIT_NOT_FEASIBLE and "GPU 0 is in use by another program (process 4242)" in text


def test_on_battery_and_owner_risk() -> None:
    code, text = refused("laptop-3070-on-battery.json")
    assert code == EXIT_NOT_FEASIBLE
    assert "the machine runs on battery" in text
    assert "rates the owner risk high" in text and "--accept-owner-risk" in text


def test_owner_risk_accepted_runs_past_the_refusal() -> None:
    code, text = refused("reference-laptop.json", confirm=False, yes=False)  # owner risk high
    assert "rates the owner risk high" in text
    code, text = refused("reference-laptop.json", accept=True, confirm=False, yes=False)
    assert code == EXIT_NOT_FEASIBLE and "not confirmed (give --yes" in text  # past the refusals: it asked


def test_an_ordinary_container_is_no_refusal() -> None:
    code, text = refused("dedicated-4090.json", change=add_container("grafana", "grafana/grafana:11"), confirm=False, yes=False)
    assert "did not start: not confirmed" in text


def test_the_refusal_as_json() -> None:
    facts = load_snapshot(standins.SNAPSHOTS / "laptop-3070-on-battery.json")
    deps = Deps(collect=lambda: facts, nvml=None, driver=lambda: None, kernel_lines=lambda since: [],
                confirm=lambda q: True, progress=lambda line: None)
    code, text, _ = execute(Request(minutes=1, max_temp=None, yes=True, accept_owner_risk=False), deps, "json")
    doc = json.loads(text)
    assert code == EXIT_NOT_FEASIBLE and len(doc["refused"]) == 2 and doc["preflight"]["owner_risk"] == "high"


def test_a_rental_the_docker_api_lists(request: pytest.FixtureRequest, tmp_path: Any) -> None:
    """The refusal from what the real Docker collector reads off a Docker API (the suite's API
    served on a Unix socket, listing a Vast rental's container as a host's daemon does)."""
    from hostcheck.collectors import CollectContext, docker_daemon

    point_docker_at = request.getfixturevalue("docker_env")  # the collectors' tests' fixture, imported above
    sock = tmp_path / "docker.sock"
    with fake_docker_daemon(sock):
        point_docker_at(sock)
        collected = docker_daemon.collect(CollectContext())

    def change(facts: dict[str, Any]) -> None:
        facts["docker"] = collected

    code, text = refused("dedicated-4090.json", change=change)
    names = [c["name"] for c in collected["containers"]]
    assert code == EXIT_NOT_FEASIBLE and any(n.startswith("C.") for n in names)
    assert "a rental or provider container is running (C." in text
