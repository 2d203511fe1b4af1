"""What NVIDIA's model names and compute capabilities say: architecture and FP32 throughput.

Data, not logic: the generation checks read NVML's architecture first, the compute
capability second and fall back to these name patterns only when the driver reports neither.
FP32 figures are NVIDIA's published boost-clock numbers for the reference boards; laptop GPUs
are left out on purpose (their throughput depends on the maker's power limit).
"""

from __future__ import annotations

import re

# Oldest first; the rank is what "X or newer" compares.
ARCHITECTURES = ("kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "rubin")

# nvmlDeviceGetArchitecture() codes (nvml.h NVML_DEVICE_ARCH_*).
NVML_ARCH = {2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing", 7: "ampere", 8: "ada",
             9: "hopper", 10: "blackwell", 13: "rubin"}  # fmt: skip

# (major, minor) compute capability -> architecture; a major alone covers its minors.
_CC_EXACT = {(7, 0): "volta", (7, 2): "volta", (7, 5): "turing", (8, 9): "ada"}
_CC_MAJOR = {3: "kepler", 5: "maxwell", 6: "pascal", 8: "ampere", 9: "hopper", 10: "blackwell", 11: "blackwell",
             12: "blackwell"}  # fmt: skip

# Checked in order: the specific names (e.g. Maxwell's "GTX TITAN X") before broader ones.
_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"Ada Generation|RTX \d+ (SFF )?Ada", "ada"),
    (r"Quadro RTX|TITAN RTX", "turing"),
    (r"GTX TITAN X\b", "maxwell"),
    (r"GTX TITAN( Black| Z)?$", "kepler"),
    (r"RTX 50\d\d|\bG?B[123]00\b|Blackwell", "blackwell"),
    (r"\bG?H(100|200|800|20)\b", "hopper"),
    (r"RTX 40\d\d|\bL(4|20|40S?)\b|RTX \d+ Ada|Ada Generation", "ada"),
    (r"RTX 30\d\d|RTX A\d{4}|\bA(2|10G?|16|30|40|100|800)\b|A100-|A800-|CMP 170HX", "ampere"),
    (r"RTX 20\d\d|GTX 16\d\d|TITAN RTX|Quadro RTX|\bT4\b|\bT(400|600|1000|1200)\b", "turing"),
    (r"V100|TITAN V\b|Quadro GV100", "volta"),
    (r"GTX 10\d\d|TITAN Xp?\b|TITAN X \(Pascal\)|\bP(4|6|40|100)\b|Quadro P\d+|\bMX[1-3]\d0\b", "pascal"),
    (r"GTX (9\d\d|7[45]\d)M?\b|\bM(10|40|60)\b|Quadro M\d+", "maxwell"),
    (r"GTX (6\d\d|7[0-36-9]\d)\b|\bK(10|20|40|80)\b|Quadro K\d+", "kepler"),
)

# Normalised model name -> FP32 TFLOPS (NVIDIA specifications, boost clock).
_FP32_TFLOPS: tuple[tuple[str, float], ...] = (
    (r"GTX 970", 3.9), (r"GTX 980", 5.0),
    (r"GTX 1060( 6GB| 3GB)?", 4.4), (r"GTX 1070", 6.5), (r"GTX 1070 Ti", 8.2), (r"GTX 1080", 8.9),
    (r"GTX 1080 Ti", 11.3), (r"TITAN Xp", 12.1), (r"P40", 11.8), (r"P100-PCIE-(12|16)GB", 9.3),
    (r"RTX 2060", 6.5), (r"RTX 2070", 7.5), (r"RTX 2080", 10.1), (r"RTX 2080 Ti", 13.4), (r"T4", 8.1),
    (r"V100-PCIE-(16|32)GB", 14.0), (r"V100-SXM2-(16|32)GB", 15.7),
    (r"RTX 3060", 12.7), (r"RTX 3060 Ti", 16.2), (r"RTX 3070", 20.3), (r"RTX 3070 Ti", 21.7),
    (r"RTX 3080", 29.8), (r"RTX 3080 Ti", 34.1), (r"RTX 3090", 35.6), (r"RTX 3090 Ti", 40.0),
    (r"RTX A4000", 19.2), (r"RTX A5000", 27.8), (r"RTX A6000", 38.7), (r"A10", 31.2), (r"A40", 37.4),
    (r"A100(-SXM4|-PCIE)?-(40|80)GB|A100 80GB PCIe", 19.5),
    (r"RTX 4060", 15.1), (r"RTX 4060 Ti", 22.1), (r"RTX 4070", 29.1), (r"RTX 4070 Ti", 40.1),
    (r"RTX 4080", 48.7), (r"RTX 4090", 82.6), (r"L4", 30.3), (r"L40", 90.5), (r"L40S", 91.6),
    (r"RTX 6000 Ada Generation", 91.1), (r"H100 PCIe", 51.2), (r"H100 80GB HBM3|H100 SXM5 80GB", 66.9),
    (r"H200", 66.9), (r"RTX 5080", 56.3), (r"RTX 5090", 104.8),
)  # fmt: skip


def normalise(name: str) -> str:
    """'NVIDIA GeForce RTX 4090' -> 'RTX 4090'; 'Tesla P40' -> 'P40'."""
    text = re.sub(r"\s+", " ", name).strip()
    for prefix in ("NVIDIA ", "GeForce ", "Tesla "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text


def arch_from_nvml(code: int) -> str | None:
    return NVML_ARCH.get(int(code))


def arch_from_compute_capability(text: str) -> str | None:
    """'8.6' -> 'ampere'; None when the capability is not one NVIDIA has shipped."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(text))
    if not match:
        return None
    major, minor = int(match.group(1)), int(match.group(2))
    return _CC_EXACT.get((major, minor)) or _CC_MAJOR.get(major)


def arch_from_name(name: str) -> str | None:
    for pattern, arch in _NAME_PATTERNS:
        if re.search(pattern, name):
            return arch
    return None


def fp32_tflops(name: str) -> float | None:
    """Published FP32 TFLOPS for a desktop/datacenter model, None when not in the table."""
    short = normalise(name)
    for pattern, tflops in _FP32_TFLOPS:
        if re.fullmatch(pattern, short):
            return tflops
    return None


def rank(arch: str) -> int:
    return ARCHITECTURES.index(arch)
