"""The local stand-in for Vast's API (tests/market_standin.py), served for one test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.market_standin import StandIn, market_of, serve


@pytest.fixture
def market() -> Iterator[StandIn]:
    state = market_of()
    server, thread = serve(state)
    yield state
    server.shutdown()
    server.server_close()
    thread.join(5)
