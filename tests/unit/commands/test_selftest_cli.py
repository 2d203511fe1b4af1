"""`hostcheck selftest` as the shell sees it: its help, and bad options refused before anything
is collected or loaded (exit 2)."""

from __future__ import annotations

import pytest

from tests.helpers import run_cli


def test_the_help_names_every_stage_its_source_and_time() -> None:
    done = run_cli("selftest", "--help")
    assert done.returncode == 0
    for words in ("1. preflight", "2. VRAM: allocate 95%", "3. host-device link", "> 2.85 GB/s",
                  "(at most 16 s per GPU)", "4. sustained load", "stage runs 60 s", "5. several GPUs",
                  "NOT read-only", "--accept-owner-risk", "docs/selftest.md"):
        assert words in done.stdout, words
    assert all(len(line) <= 80 for line in done.stdout.splitlines())
    assert "selftest" in run_cli("--help").stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--minutes", "0.5"], "--minutes must be from 1 to 60, not 0.5"),
    (["--minutes", "nan"], "--minutes must be from 1 to 60"),
    (["--max-temp", "200"], "--max-temp must be from 30 to 110 °C, not 200"),
    (["--format", "markdown"], "the markdown format does not render the self-test result"),
])
def test_bad_options(args: list[str], message: str) -> None:
    done = run_cli("selftest", *args)
    assert done.returncode == 2 and message in done.stderr


def test_the_real_wiring_without_a_driver() -> None:
    """The command's own wiring on this machine (a real offline collection, the real NVML
    binding): without a driver it says so and exits 3, having loaded nothing on any GPU."""
    import json

    done = run_cli("selftest", "--cuda-library", "/nonexistent/libcuda.so.1", "--yes", "--accept-owner-risk",
                   "--format", "json")
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    if "refused" in doc:  # a machine where something else holds a GPU, or on battery: said, and nothing ran
        assert doc["refused"] and all(isinstance(r, str) and r for r in doc["refused"])
    else:
        assert doc["error"].startswith("cannot load /nonexistent/libcuda.so.1")
        assert doc["answer"]["passed"] is False and doc["released"] is True
        assert "preflight: collecting facts" in done.stderr
