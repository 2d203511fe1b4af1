#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU, in one go, each under its own time limit (about
# 5 minutes in all; give the whole script 8 so a rerun still fits a 15-minute device budget):
#   1. nvidia-smi -q -x and `hostcheck facts`, then bench/gpu_truth.py: every GPU fact against
#      nvidia-smi's own view of the card;
#   2. hostcheck selftest --minutes 2 --yes --format json: every stage on the real driver;
#   3. bench/selftest.py: the sampler's own cost per second of load, through real NVML;
#   4. the stages inside a container (--in-container), where Docker has a python:3.11+ or
#      vastai/test:self-test image already;
#   5. tests/unit/selftest/test_real_driver.py, where the virtualenv has pytest.
# Everything lands in OUT_DIR (default: $OUT, else ./gpu-check): smi.xml, facts.json,
# truth.txt, selftest.json, selftest.txt (stderr: the progress lines), sampler.txt, and
# summary.txt with each step's exit status and time. docs/selftest.md ("Where it has run") takes
# the figures from there.
#
# Usage, from the repository root: scripts/gpu_check.sh [OUT_DIR]
# PYTHON names the interpreter of a virtualenv with hostcheck's dependencies (default
# .venv/bin/python). A machine that cannot reach PyPI needs that virtualenv carried to it, or a
# directory of wheels (HOSTCHECK_WHEELS=DIR, made beforehand with `pip download -d DIR .`)
# from which the script builds one offline.
set -u
cd "$(dirname "$0")/.."
out="${1:-${OUT:-./gpu-check}}"
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
python="${PYTHON:-.venv/bin/python}"

step() {  # step NAME SECONDS COMMAND...: run with a time limit, note status and seconds
    local name=$1 limit=$2 start status
    shift 2
    start=$(date +%s)
    timeout --kill-after=10 "$limit" "$@"
    status=$?
    echo "$name: exit $status in $(( $(date +%s) - start )) s (limit $limit s)" | tee -a "$summary"
}

if ! "$python" -c "import hostcheck, pynvml" 2>/dev/null; then
    if [ -n "${HOSTCHECK_WHEELS:-}" ]; then
        python3 -m venv /tmp/hostcheck-venv &&
            /tmp/hostcheck-venv/bin/pip install -q --no-index --find-links "$HOSTCHECK_WHEELS" -e . &&
            python=/tmp/hostcheck-venv/bin/python
    fi
fi
if ! "$python" -c "import hostcheck, pynvml" 2>/dev/null; then
    echo "no Python with hostcheck's dependencies: set PYTHON or HOSTCHECK_WHEELS" | tee -a "$summary"
    exit 2
fi
export PYTHONPATH="$PWD"

{ date -u +"%Y-%m-%dT%H:%M:%SZ"; uname -r; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,power.limit,power.default_limit,temperature.gpu --format=csv; } >"$out/machine.txt" 2>&1
step "nvidia-smi -q -x" 30 sh -c "nvidia-smi -q -x >'$out/smi.xml'"
step "hostcheck facts" 120 sh -c "'$python' -m hostcheck.cli facts --offline >'$out/facts.json'"
step "gpu_truth" 60 sh -c "'$python' bench/gpu_truth.py --facts '$out/facts.json' --xml '$out/smi.xml' >'$out/truth.txt' 2>&1"
# --accept-owner-risk: a lent test machine is nobody's rental host; its owner-risk findings
# (no firewall, password SSH ...) would otherwise stop the run before the GPU is touched.
step "hostcheck selftest" 330 sh -c "'$python' -m hostcheck.cli selftest --minutes 2 --yes --accept-owner-risk --format json -o '$out/selftest.json' 2>'$out/selftest.txt'"
step "bench/selftest.py" 60 sh -c "'$python' bench/selftest.py --samples 300 >'$out/sampler.txt' 2>&1"
# The stages inside a container, where Docker and an image with Python 3.11+ are already there
# (nothing is pulled): the renter's path, through the NVIDIA runtime.
image=$(docker image ls --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -m1 -E '^(python:3\.1[1-9]|vastai/test:self-test)' || true)
if [ -n "$image" ]; then
    step "selftest in $image" 150 sh -c "'$python' -m hostcheck.cli selftest --minutes 1 --yes --accept-owner-risk --in-container '$image' --format json -o '$out/selftest-container.json' 2>'$out/selftest-container.txt'"
fi
# The kernels on the real driver (the driver's JIT, the pattern read back), where pytest is there.
if "$python" -c "import pytest" 2>/dev/null; then
    step "test_real_driver" 120 sh -c "'$python' -m pytest -p no:cacheprovider -q tests/unit/selftest/test_real_driver.py >'$out/real_driver.txt' 2>&1"
fi
cat "$summary"
