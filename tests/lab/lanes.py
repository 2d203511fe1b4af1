"""Lanes: which tests may run side by side (pytest-xdist) and in what order.

A test's lane follows from its markers, so a new test module needs nothing else:

- ``vm``: every test marked ``vm``. One xdist group for the whole run: under TCG a VM takes a
  whole core, so there is one VM at a time.
- ``lab``: marked ``nspawn``, ``natlab``, ``ansible`` or ``fleet``. One xdist group per module
  and per value of a module-scoped parameter (``test_profile_lifecycle.py[bookworm]`` and
  ``[trixie]`` are two groups and may run on two workers at once), so a module fixture is set
  up once, on one worker.
- ``unit``: everything else; one group per module.

Order (xdist hands out groups in this order, ``--no-loadscope-reorder``): the vm lane, then
lab groups by their cost, most expensive first, then unit modules. A module states its cost
(cold seconds on the 2-core CI machine) with ``pytestmark = pytest.mark.lab_cost(300)``;
without it a lab module counts as :data:`DEFAULT_LAB_COST` s.

While the lab cache is still being built (``scripts/test`` builds it beside the first tests:
the file named by ``HOSTCHECK_LAB_PENDING`` exists until the build ends), a worker asking for
work gets the next unit group instead, so the build's downloads and dpkg runs overlap tests
that need no lab rather than lab tests waiting on the cache's lock.

How the groups reach xdist: with ``--dist loadgroup`` this plugin supplies the scheduler
(:class:`LaneScheduling`). Each worker writes its nodeid -> group map and each group's lane to
the file named by ``HOSTCHECK_LANES_FILE`` (set by the controller before the workers start)
when its collection is done; the controller's scheduler reads it. (xdist's own loadgroup
relies on renaming nodeids, which pytest 9.2's node ids do not allow.)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

LANES_FILE = "HOSTCHECK_LANES_FILE"
LAB_PENDING = "HOSTCHECK_LAB_PENDING"

LAB_MARKERS = ("nspawn", "natlab", "ansible", "fleet")
DEFAULT_LAB_COST = 60.0
LANE_ORDER = ("vm", "lab", "unit")


def lane(item: pytest.Item) -> str:
    if item.get_closest_marker("vm"):
        return "vm"
    if any(item.get_closest_marker(m) for m in LAB_MARKERS):
        return "lab"
    return "unit"


def _module_params(item: pytest.Item) -> str:
    """Ids of this item's module- or session-scoped parameters ("" when none)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return ""
    info = getattr(item, "_fixtureinfo", None)
    values = []
    for name, value in sorted(callspec.params.items()):
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if defs and defs[-1].scope in ("module", "package", "session"):
            values.append(str(value))
    return ",".join(values)


def group(item: pytest.Item) -> str:
    if lane(item) == "vm":
        return "vm"
    module = item.nodeid.split("::", 1)[0]
    params = _module_params(item)
    return f"{module}[{params}]" if params else module


def cost(item: pytest.Item) -> float:
    marker = item.get_closest_marker("lab_cost")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return DEFAULT_LAB_COST if lane(item) != "unit" else 0.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "lab_cost(seconds): cold cost of a lab module, for ordering its lane")
    if not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") == "loadgroup":
        fd, path = tempfile.mkstemp(prefix="hostcheck-lanes-", suffix=".json")
        os.close(fd)
        os.environ[LANES_FILE] = path  # inherited by the workers, started after this
        config.add_cleanup(lambda: Path(path).unlink(missing_ok=True))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if getattr(config.option, "dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """xdist's scope scheduling with this plugin's groups as the scopes."""

        _lanes: dict[str, dict[str, str]] | None = None

        def _read_lanes(self) -> dict[str, dict[str, str]]:
            if self._lanes is None:
                try:
                    self._lanes = json.loads(Path(os.environ[LANES_FILE]).read_text() or "{}")
                except (KeyError, OSError, ValueError):
                    self._lanes = {}
            return self._lanes

        def _split_scope(self, nodeid: str) -> str:
            return self._read_lanes().get("groups", {}).get(nodeid) or nodeid.split("::", 1)[0]

        def _assign_work_unit(self, node: Any) -> None:
            pending = os.environ.get(LAB_PENDING)
            if pending and Path(pending).exists():
                lanes = self._read_lanes().get("lanes", {})
                unit = next((scope for scope in self.workqueue if lanes.get(scope) == "unit"), None)
                if unit is not None:
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return LaneScheduling(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_collection_finish(session: pytest.Session) -> Iterator[None]:
    """Order by lane and cost, once pytest has grouped module parameters and applied -k/-m.
    Stable: within a group the order pytest chose is kept. Before the other implementations:
    an xdist worker sends this order to the controller in its own hook of the same name, and
    the controller hands out groups in it (``--no-loadscope-reorder``)."""
    items = session.items
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(group(item), []).append(item)
    # a group's lane is its most demanding item's: a module with one lab test is a lab group
    group_lanes = {name: min((lane(i) for i in members), key=LANE_ORDER.index) for name, members in groups.items()}

    def rank(name: str) -> tuple[int, float]:
        return (LANE_ORDER.index(group_lanes[name]), -max(cost(i) for i in groups[name]))

    items[:] = [item for name in sorted(groups, key=rank) for item in groups[name]]
    path = os.environ.get(LANES_FILE)
    if path and hasattr(session.config, "workerinput"):
        tmp = Path(f"{path}.{os.getpid()}")
        tmp.write_text(json.dumps({"groups": {item.nodeid: group(item) for item in items}, "lanes": group_lanes}))
        tmp.replace(path)  # every worker writes the same map; the last complete one wins
    return (yield)
