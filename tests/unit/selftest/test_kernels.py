"""The self-test's PTX, assembled by NVIDIA's own ptxas for every GPU architecture from Maxwell
(sm_50) to the newest the assemblers know: a kernel a driver's JIT would refuse fails here.

ptxas comes from the `nvidia-cuda-nvcc-cu12` wheel (CUDA 12: sm_50 to sm_121) and the
`nvidia-cuda-nvcc` wheel (CUDA 13: sm_75 to the newest; CUDA 13 dropped Maxwell to Volta), test
dependencies only (pyproject.toml's test extra). The driver on an owner's machine compiles the
same text itself; no toolkit is needed there."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from hostcheck.selftest import kernels

ASSEMBLERS = ("cuda_nvcc/bin/ptxas", "cu13/bin/ptxas")


def assemblers() -> list[Path]:
    spec = importlib.util.find_spec("nvidia")  # the namespace both wheels install into
    roots = list(spec.submodule_search_locations or []) if spec else []
    found = [Path(root) / relative for root in roots for relative in ASSEMBLERS if (Path(root) / relative).exists()]
    assert len(found) == 2, f"ptxas of both wheels wanted (pip install -e .[test]); found {found}"
    return found


def architectures(ptxas: Path) -> list[str]:
    """The real architectures this ptxas can generate code for (sm_XY, not the a/f variants)."""
    text = subprocess.run([ptxas, "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    section = text[text.index("--gpu-name"):]
    section = section[: section.index("\n\n")] if "\n\n" in section else section
    return sorted(set(re.findall(r"'(sm_\d+)'", section)), key=lambda a: int(a[3:]))


def test_both_assemblers_cover_maxwell_to_the_newest() -> None:
    archs = [architectures(p) for p in assemblers()]
    covered = {a for found in archs for a in found}
    assert kernels.OLDEST_TARGET in covered
    assert "sm_50" in archs[0] and "sm_90" in archs[0]
    # the newest architecture either assembler knows is covered (CUDA 13's)
    newest = max(covered, key=lambda a: int(a[3:]))
    assert newest in archs[1]


@pytest.mark.parametrize("ptxas_index", [0, 1])
def test_the_ptx_assembles_for_every_architecture(ptxas_index: int, tmp_path: Path) -> None:
    ptxas = assemblers()[ptxas_index]
    source = tmp_path / "selftest.ptx"
    source.write_text(kernels.PTX, encoding="ascii")
    failures = {}
    for arch in architectures(ptxas):
        done = subprocess.run([ptxas, "-arch", arch, "-o", str(tmp_path / f"{arch}.cubin"), str(source)],
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            failures[arch] = done.stderr.strip()[:300]
        else:
            assert (tmp_path / f"{arch}.cubin").stat().st_size > 0
    assert not failures, failures


def test_a_broken_kernel_fails_the_assembler(tmp_path: Path) -> None:
    """The test above can fail: a typo in the PTX is refused by ptxas, as by a driver."""
    source = tmp_path / "broken.ptx"
    source.write_text(kernels.PTX.replace("fma.rn.f32", "fma.rx.f32", 1), encoding="ascii")
    done = subprocess.run([assemblers()[0], "-arch", "sm_50", "-o", str(tmp_path / "b.cubin"), str(source)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and "error" in done.stderr.lower()


def test_every_entry_the_stages_launch_is_in_the_ptx() -> None:
    for entry in kernels.ENTRIES:
        assert f".visible .entry {entry}(" in kernels.PTX
    assert kernels.pattern_word(1, 0) == kernels.PATTERN_MULTIPLIER
    assert kernels.pattern_word(2, 5) == (2 * 0x9E3779B1 + 5) % 2**32
