"""The skip summary (tests/lab/skips.py): every reason counted, in-process and through
pytest-xdist's controller, and a reason the allow-list does not name failing a strict run.

No lab needed: the demonstration module skips one test for an allowed reason and two for one
that is not allowed; a second module is skipped whole.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.lab import skips

REPO = Path(__file__).resolve().parents[2]
ALLOWED = "this machine has an NVIDIA driver"
DEMO = f"""
import pytest

@pytest.mark.skipif(True, reason={ALLOWED!r})
def test_allowed():
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_unexpected(n):
    pytest.skip("a tool happens to be missing here")

def test_runs():
    assert True

@pytest.mark.xfail(reason="an expected failure is not a skip", strict=True)
def test_xfail():
    assert False
"""


SKIPPED_MODULE = """
import pytest

pytest.skip("a whole module needs a missing tool", allow_module_level=True)
"""


def test_the_allow_list_names_a_why_for_every_reason() -> None:
    allowed = skips.allowed_reasons()
    assert ALLOWED in allowed and all(len(why.split()) >= 5 for why in allowed.values())


@pytest.mark.parametrize(("workers", "strict"), [(0, False), (2, True)])
def test_every_reason_is_counted_and_an_unexpected_one_fails_a_strict_run(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: int, strict: bool) -> None:
    pytester.makeconftest("pytest_plugins = ['tests.lab.skips']\n")
    pytester.makepyfile(test_skip_demo=DEMO, test_skip_module=SKIPPED_MODULE)
    monkeypatch.setenv(skips.STRICT_ENV, "1" if strict else "0")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    args = ["-p", "no:cacheprovider", *(["-n", str(workers)] if workers else [])]
    result = pytester.runpytest_subprocess(*args) if workers else pytester.runpytest_inprocess(*args)
    out = result.stdout.str()
    assert "skips (tests/lab/skips.py)" in out
    assert "    1  allowed                this machine has an NVIDIA driver" in out
    verdict = "NOT ALLOWED" if strict else "not in the allow-list"
    assert f"    2  {verdict:<21}  a tool happens to be missing here" in out
    assert f"    1  {verdict:<21}  a whole module needs a missing tool" in out
    assert "expected failure" not in out.split("skips (tests/lab/skips.py)")[1]
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if strict else pytest.ExitCode.OK), out


def test_a_strict_run_with_allowed_skips_only_passes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest("pytest_plugins = ['tests.lab.skips']\n")
    pytester.makepyfile(test_skip_demo=DEMO.split("@pytest.mark.parametrize")[0])
    monkeypatch.setenv(skips.STRICT_ENV, "1")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*1  allowed*this machine has an NVIDIA driver"])
