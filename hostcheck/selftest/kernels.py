"""The self-test's GPU kernels, as PTX text the driver compiles when the module is loaded.

PTX, not a compiled binary: the driver's own JIT turns it into the card's machine code, so the
host needs no CUDA toolkit and one text serves every card from Maxwell on. ``.target sm_50``
is the oldest architecture the policies accept; the driver compiles it for any newer card.
``.version 6.0`` (PTX ISA of CUDA 9.0) is old enough for every driver the self-test supports
(CUDA 11.0 and later accept PTX ISA 7.0 and below) and uses nothing a later ISA changed.
The suite assembles this text with NVIDIA's ptxas for every architecture from sm_50 to the
newest (tests/unit/selftest/test_kernels.py), so a kernel a driver would refuse fails there.

Kernels (each a grid-stride loop, so any grid covers any length):
- ``hc_fill(u32 *buf, u64 words, u32 seed)``: ``buf[i] = i * 0x9E3779B1 + seed`` (a pattern
  where every word differs from its neighbours, so an address line stuck or crossed shows).
- ``hc_check(u32 *buf, u64 words, u32 seed, u32 *errors)``: counts the words that differ
  from that pattern into ``*errors``.
- ``hc_burn(f32 *out, u32 iterations)``: a chain of fused multiply-adds per thread, the
  result stored so the compiler cannot drop the work: full load on the SM's FP32 units.
"""

from __future__ import annotations

PATTERN_MULTIPLIER = 0x9E3779B1
FILL, CHECK, BURN = "hc_fill", "hc_check", "hc_burn"
ENTRIES = (FILL, CHECK, BURN)
OLDEST_TARGET = "sm_50"
THREADS_PER_BLOCK = 256
BURN_FMAS_PER_ITERATION = 8


def pattern_word(index: int, seed: int) -> int:
    """The word hc_fill writes at ``index`` (what a host-side check compares with)."""
    return (index * PATTERN_MULTIPLIER + seed) & 0xFFFFFFFF


_PROLOGUE = """\
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mul.wide.u32 %rd3, %r2, %r3;
    cvt.u64.u32 %rd4, %r4;
    add.u64 %rd3, %rd3, %rd4;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd5, %r5, %r3;
"""

PTX = f"""\
//
// hostcheck selftest kernels (hostcheck/selftest/kernels.py)
//
.version 6.0
.target {OLDEST_TARGET}
.address_size 64

.visible .entry {FILL}(
    .param .u64 buf,
    .param .u64 words,
    .param .u32 seed
)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [buf];
    ld.param.u64 %rd2, [words];
    ld.param.u32 %r1, [seed];
    cvta.to.global.u64 %rd1, %rd1;
{_PROLOGUE}FILL_LOOP:
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra.uni FILL_DONE;
    cvt.u32.u64 %r6, %rd3;
    mad.lo.u32 %r7, %r6, {PATTERN_MULTIPLIER}, %r1;
    shl.b64 %rd6, %rd3, 2;
    add.u64 %rd7, %rd1, %rd6;
    st.global.u32 [%rd7], %r7;
    add.u64 %rd3, %rd3, %rd5;
    bra.uni FILL_LOOP;
FILL_DONE:
    ret;
}}

.visible .entry {CHECK}(
    .param .u64 buf,
    .param .u64 words,
    .param .u32 seed,
    .param .u64 errors
)
{{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [buf];
    ld.param.u64 %rd2, [words];
    ld.param.u32 %r1, [seed];
    ld.param.u64 %rd8, [errors];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd8, %rd8;
{_PROLOGUE}CHECK_LOOP:
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra.uni CHECK_DONE;
    cvt.u32.u64 %r6, %rd3;
    mad.lo.u32 %r7, %r6, {PATTERN_MULTIPLIER}, %r1;
    shl.b64 %rd6, %rd3, 2;
    add.u64 %rd7, %rd1, %rd6;
    ld.global.u32 %r8, [%rd7];
    setp.ne.u32 %p2, %r8, %r7;
    @%p2 red.global.add.u32 [%rd8], 1;
    add.u64 %rd3, %rd3, %rd5;
    bra.uni CHECK_LOOP;
CHECK_DONE:
    ret;
}}

.visible .entry {BURN}(
    .param .u64 out,
    .param .u32 iterations
)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<10>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [iterations];
    cvta.to.global.u64 %rd1, %rd1;
{_PROLOGUE}    cvt.u32.u64 %r6, %rd3;
    cvt.rn.f32.u32 %f1, %r6;
    mul.f32 %f1, %f1, 0f3A800000;
    mov.f32 %f2, 0f3F800000;
    mov.f32 %f3, 0f3F7FFFEF;
    mov.f32 %f4, 0f33D6BF95;
    mov.u32 %r7, 0;
BURN_LOOP:
    setp.ge.u32 %p1, %r7, %r1;
    @%p1 bra.uni BURN_DONE;
    fma.rn.f32 %f1, %f1, %f3, %f4;
    fma.rn.f32 %f2, %f2, %f3, %f1;
    fma.rn.f32 %f1, %f1, %f3, %f4;
    fma.rn.f32 %f2, %f2, %f3, %f1;
    fma.rn.f32 %f1, %f1, %f3, %f4;
    fma.rn.f32 %f2, %f2, %f3, %f1;
    fma.rn.f32 %f1, %f1, %f3, %f4;
    fma.rn.f32 %f2, %f2, %f3, %f1;
    add.u32 %r7, %r7, 1;
    bra.uni BURN_LOOP;
BURN_DONE:
    add.f32 %f5, %f1, %f2;
    shl.b64 %rd6, %rd3, 2;
    add.u64 %rd7, %rd1, %rd6;
    st.global.f32 [%rd7], %f5;
    ret;
}}
"""
