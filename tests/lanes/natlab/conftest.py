"""Fixtures for the NAT lab (root): one lab per ISP kind, shared by every test of a run.

The lab builder lives in ``natlab_builder.py``. Labs are built on first use and torn down
by a session finalizer (and, should the finalizer never run, by ``atexit`` and by the
stale-lab sweep at the start of the next run). Router variants are swapped by replacing
the home router's nftables tables, so one topology serves the whole matrix.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import natlab_builder as nb

REQUIRED_TOOLS = ("ip", "nft", "turnserver", "miniupnpd", "ss", "sysctl")


def _require_lab() -> None:
    if os.geteuid() != 0:
        pytest.skip("the NAT lab needs root (network namespaces)")
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        # As root the lab is expected to run (CI does): a missing package is a failure.
        pytest.fail(f"NAT lab tools missing: {', '.join(missing)} (apt: iproute2 nftables coturn miniupnpd)")


@pytest.fixture(scope="session")
def natlab_factory() -> Iterator[Callable[[str], nb.NatLab]]:
    """``natlab_factory("plain"|"cgnat")`` -> a built lab, cached for the session."""
    _require_lab()
    nb.remove_stale_labs()
    labs: dict[str, nb.NatLab] = {}

    def close_all() -> None:
        for lab in labs.values():
            lab.close()
        labs.clear()

    atexit.register(close_all)

    def get(isp: str) -> nb.NatLab:
        if isp not in labs:
            lab = nb.NatLab(isp=isp).build()
            labs[isp] = lab
            try:
                lab.start_probe_server(nb.PROBE_TOKEN, rate_per_min=1000)
            except BaseException:
                lab.close()
                del labs[isp]
                raise
        return labs[isp]

    try:
        yield get
    finally:
        close_all()
        atexit.unregister(close_all)


@pytest.fixture
def natlab(natlab_factory: Callable[[str], nb.NatLab], request: pytest.FixtureRequest) -> Iterator[nb.NatLab]:
    """The lab for ``request.param`` (indirect parametrization), reset to plain masquerade after."""
    lab = natlab_factory(getattr(request, "param", "plain"))
    try:
        yield lab
    finally:
        lab.set_home("masquerade", firewall=False)
        lab.set_isp(firewall=False)
