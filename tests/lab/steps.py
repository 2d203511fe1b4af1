"""Time budgets for the steps of a long lab set-up, with failures that explain themselves.

A module fixture that boots a host, installs hostcheck and runs three playbooks is too long for
one pytest-timeout: when that fires, the traceback shows a random frame and nothing of what
was happening. Here each step has its own budget (at least three times what it takes on
a cold run of the 2-core CI machine, see the constants next to each use) and, when one runs
out, :class:`StepOverBudget` names the step, the fixture, the time it took, the budget and the
last lines of the step's log (a playbook's output, a console).

Interruption uses SIGALRM (main thread only: pytest's, and each xdist worker's). pytest-timeout
is configured with ``timeout_func_only`` so it never arms its own alarm during fixture set-up;
an alarm that is already armed is saved and re-armed afterwards anyway.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab import timing
from tests.lab.errors import LabError

LogSource = Callable[[], str] | Path | None
TAIL_LINES = 40


class StepOverBudget(LabError):
    """A set-up step ran past its budget."""


def _tail(source: LogSource, lines: int = TAIL_LINES) -> str:
    if source is None:
        return "(this step keeps no log)"
    try:
        text = source.read_text(errors="replace") if isinstance(source, Path) else source()
    except Exception as exc:  # the report must not hide the real failure
        return f"(could not read the log: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(log empty)"


def _s(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"


class _Alarm(BaseException):
    """Raised inside the step by the alarm; BaseException so no ``except Exception`` in the
    step swallows it."""


@dataclass
class Steps:
    """The steps of one fixture (``what``: e.g. "profile lifecycle [trixie]")."""

    what: str
    done: list[tuple[str, float, float]] = field(default_factory=list)
    """(step, seconds, budget) of the steps finished so far."""

    def summary(self) -> str:
        return ", ".join(f"{name} {seconds:.0f}/{budget:.0f}s" for name, seconds, budget in self.done) or "none"

    def over_budget(self, name: str, seconds: float, budget: float, log: LogSource, detail: str = "") -> StepOverBudget:
        return StepOverBudget(
            f"{self.what}: step '{name}' ran past its budget: {_s(seconds)} of {_s(budget)}{detail}\n"
            f"steps before it: {self.summary()}\n--- last lines of its log ---\n{_tail(log)}")

    def record(self, name: str, seconds: float, budget: float) -> None:
        self.done.append((name, seconds, budget))
        timing.record("step", f"{self.what}: {name}", seconds, budget=budget)

    @contextmanager
    def step(self, name: str, budget: float, *, log: LogSource = None, interrupt: bool = True) -> Iterator[None]:
        """Run the block with a budget of ``budget`` seconds; record how long it took.
        ``interrupt=False``: the block enforces the budget itself (a subprocess timeout that
        keeps its output); it is still checked and reported here."""
        started = time.monotonic()
        armed = interrupt and threading.current_thread() is threading.main_thread()
        previous_handler = None
        previous_timer = (0.0, 0.0)
        if armed:
            def on_alarm(signum: int, frame: object) -> None:
                raise _Alarm()
            previous_handler = signal.signal(signal.SIGALRM, on_alarm)
            previous_timer = signal.setitimer(signal.ITIMER_REAL, budget)
        try:
            yield
        except _Alarm:
            seconds = time.monotonic() - started
            raise self.over_budget(name, seconds, budget, log) from None
        finally:
            seconds = time.monotonic() - started
            if armed:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous_handler)
                if previous_timer[0] > 0:
                    signal.setitimer(signal.ITIMER_REAL, max(0.001, previous_timer[0] - seconds), previous_timer[1])
            self.record(name, seconds, budget)
        if not armed and seconds > budget:
            raise self.over_budget(name, seconds, budget, log, " (checked when it ended)")
