/*
 * A stand-in for libcuda.so.1, the CUDA driver API, for machines without an NVIDIA GPU.
 *
 * It exports the symbols hostcheck/selftest/cuda.py binds, with the driver's signatures and
 * error codes, and behaves as the driver does in the cases the self-test must handle:
 *   - cuInit returns CUDA_ERROR_NO_DEVICE (100) when the scenario has no GPU;
 *   - cuMemAlloc_v2 returns CUDA_ERROR_OUT_OF_MEMORY (2) past the free-memory boundary;
 *   - an uncorrectable ECC error (214), a launch time-out (702, the display watchdog) and a
 *     device lost mid-run (999, what CUDA calls return after Xid 79) are "sticky": every later
 *     call in the context returns the same code, until the primary context is released;
 *   - copies take the time the scenario's link speed says (a x1 riser is slow in real time);
 *   - a module must be PTX with the entries asked for (CUDA_ERROR_INVALID_PTX 218,
 *     CUDA_ERROR_NOT_FOUND 500 otherwise).
 * Device memory is bookkeeping (addresses and sizes), backed by host memory only for small
 * allocations, so a "16 GiB card" costs nothing here. The scenario is read from the environment
 * variable HC_FAKE_CUDA at each cuInit ("gpus=1;total_mib=16384;free_mib=15291;fail=ecc;..."),
 * which resets the stand-in; hcfake_live() says what is still allocated, so a test can hold the
 * self-test to releasing everything.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

#define MAX_GPUS 8
#define MAX_ALLOCS 4096
#define BACKED_LIMIT (1u << 20)

static struct {
    int gpus, cc, sms, first_bus, p2p;
    unsigned long long total, free_bytes;
    double h2d, d2h, p2p_gbps, kernel_ms;
    char fail[32], name[128];
    unsigned bad_words;
    int lost_after;
} S;

static struct alloc { CUdeviceptr ptr; size_t size; int dev; void *backing; } A[MAX_ALLOCS];
static unsigned long long used[MAX_GPUS], next_offset[MAX_GPUS];
static int retained[MAX_GPUS], current = -1, sticky, launches, pending, host_allocs, modules, initialised;
static char *module_text[64];
static int module_dev[64];

static void sleep_s(double seconds) {
    if (seconds <= 0) return;
    struct timespec t = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
    nanosleep(&t, NULL);
}

static void parse(void) {
    memset(&S, 0, sizeof S);
    S.gpus = 1; S.cc = 86; S.sms = 80; S.first_bus = 1; S.p2p = 1;
    S.total = 16384ull << 20; S.free_bytes = 15291ull << 20;
    S.h2d = 12.0; S.d2h = 13.0; S.p2p_gbps = 20.0; S.kernel_ms = 5;
    strcpy(S.fail, "none"); strcpy(S.name, "NVIDIA GeForce RTX 3080 Ti Laptop GPU");
    const char *env = getenv("HC_FAKE_CUDA");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", env ? env : "");
    for (char *save, *item = strtok_r(buf, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) continue;
        *eq = 0;
        const char *k = item, *v = eq + 1;
        if (!strcmp(k, "gpus")) S.gpus = atoi(v);
        else if (!strcmp(k, "cc")) S.cc = atoi(v);
        else if (!strcmp(k, "sms")) S.sms = atoi(v);
        else if (!strcmp(k, "p2p")) S.p2p = atoi(v);
        else if (!strcmp(k, "total_mib")) S.total = strtoull(v, NULL, 10) << 20;
        else if (!strcmp(k, "free_mib")) S.free_bytes = strtoull(v, NULL, 10) << 20;
        else if (!strcmp(k, "h2d_gbps")) S.h2d = atof(v);
        else if (!strcmp(k, "d2h_gbps")) S.d2h = atof(v);
        else if (!strcmp(k, "p2p_gbps")) S.p2p_gbps = atof(v);
        else if (!strcmp(k, "kernel_ms")) S.kernel_ms = atof(v);
        else if (!strcmp(k, "bad_words")) S.bad_words = (unsigned)atoi(v);
        else if (!strcmp(k, "lost_after")) S.lost_after = atoi(v);
        else if (!strcmp(k, "fail")) snprintf(S.fail, sizeof S.fail, "%s", v);
        else if (!strcmp(k, "name")) snprintf(S.name, sizeof S.name, "%s", v);
    }
    if (S.gpus > MAX_GPUS) S.gpus = MAX_GPUS;
}

/* Releasing a primary context frees everything in it, memory and modules, as the driver does. */
static void drop_device(int dev) {
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (A[i].ptr && A[i].dev == dev) { free(A[i].backing); memset(&A[i], 0, sizeof A[i]); }
    for (int i = 0; i < 64; i++)
        if (module_text[i] && module_dev[i] == dev) { free(module_text[i]); module_text[i] = NULL; modules--; }
    used[dev] = 0; next_offset[dev] = 0;
}

#define GUARD() do { if (!initialised) return 3; if (sticky) return sticky; } while (0)
#define NEED_CTX() do { if (current < 0 || !retained[current]) return 201; } while (0)

CUresult cuGetErrorName(CUresult code, const char **name) {
    switch (code) {
    case 0: *name = "CUDA_SUCCESS"; return 0;
    case 1: *name = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 2: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *name = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    case 201: *name = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
    case 214: *name = "CUDA_ERROR_ECC_UNCORRECTABLE"; return 0;
    case 217: *name = "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"; return 0;
    case 218: *name = "CUDA_ERROR_INVALID_PTX"; return 0;
    case 400: *name = "CUDA_ERROR_INVALID_HANDLE"; return 0;
    case 500: *name = "CUDA_ERROR_NOT_FOUND"; return 0;
    case 702: *name = "CUDA_ERROR_LAUNCH_TIMEOUT"; return 0;
    case 999: *name = "CUDA_ERROR_UNKNOWN"; return 0;
    default: *name = NULL; return 1;
    }
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    parse();
    for (int d = 0; d < MAX_GPUS; d++) { drop_device(d); retained[d] = 0; }
    current = -1; sticky = 0; launches = 0; pending = 0; host_allocs = 0;
    if (!strcmp(S.fail, "nodevice") || S.gpus <= 0) { initialised = 0; return 100; }
    initialised = 1;
    return 0;
}

CUresult cuDriverGetVersion(int *v) { *v = 12080; return 0; }
CUresult cuDeviceGetCount(int *n) { if (!initialised) return 3; *n = S.gpus; return 0; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (!initialised) return 3;
    if (ordinal < 0 || ordinal >= S.gpus) return 101;
    *d = ordinal; return 0;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    if (!initialised) return 3;
    if (d < 0 || d >= S.gpus) return 101;
    snprintf(name, (size_t)len, "%s", S.name); return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    if (!initialised) return 3;
    if (d < 0 || d >= S.gpus) return 101;
    *bytes = S.total; return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    if (!initialised) return 3;
    if (d < 0 || d >= S.gpus) return 101;
    switch (attr) {
    case 16: *v = S.sms; return 0;
    case 75: *v = S.cc / 10; return 0;
    case 76: *v = S.cc % 10; return 0;
    case 33: *v = S.first_bus + d; return 0;
    case 34: *v = 0; return 0;
    case 50: *v = 0; return 0;
    default: return 1;
    }
}
CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
    if (!initialised) return 3;
    *can = S.p2p && d != peer; return 0;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) {
    GUARD();
    if (d < 0 || d >= S.gpus) return 101;
    retained[d]++;
    *ctx = (void *)(uintptr_t)(0x1000 + d);
    return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    if (!initialised) return 3;
    if (d < 0 || d >= S.gpus || !retained[d]) return 201;
    if (--retained[d] == 0) {
        drop_device(d);
        if (current == d) current = -1;
        int any = 0;
        for (int i = 0; i < S.gpus; i++) any |= retained[i];
        if (!any) sticky = 0;  /* a new context starts clean, as after a reset of the context */
    }
    return 0;
}
CUresult cuCtxSetCurrent(void *ctx) {
    GUARD();
    int d = (int)((uintptr_t)ctx - 0x1000);
    if (d < 0 || d >= S.gpus || !retained[d]) return 201;
    current = d; return 0;
}
CUresult cuCtxSynchronize(void) {
    GUARD(); NEED_CTX();
    sleep_s(pending * S.kernel_ms / 1000.0);
    pending = 0;
    if (!strcmp(S.fail, "timeout") && launches > 0) return sticky = 702;
    if (S.lost_after > 0 && launches >= S.lost_after) return sticky = 999;
    return 0;
}

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
    GUARD(); NEED_CTX();
    *free_b = S.free_bytes - used[current]; *total = S.total; return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size) {
    GUARD(); NEED_CTX();
    if (size == 0) return 1;
    if (used[current] + size > S.free_bytes) return 2;
    for (int i = 0; i < MAX_ALLOCS; i++) if (!A[i].ptr) {
        A[i].dev = current; A[i].size = size;
        A[i].ptr = 0x7f0000000000ull + ((unsigned long long)current << 40) + next_offset[current];
        A[i].backing = size <= BACKED_LIMIT ? calloc(1, size) : NULL;
        next_offset[current] += (size + 0xFFFF) & ~0xFFFFull;
        used[current] += size; *p = A[i].ptr; return 0;
    }
    return 2;
}
static struct alloc *find(CUdeviceptr p) {
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (A[i].ptr && p >= A[i].ptr && p < A[i].ptr + A[i].size) return &A[i];
    return NULL;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    GUARD();
    struct alloc *a = find(p);
    if (!a || a->ptr != p) return 1;
    used[a->dev] -= a->size; free(a->backing); memset(a, 0, sizeof *a); return 0;
}
CUresult cuMemAllocHost_v2(void **p, size_t size) {
    GUARD(); NEED_CTX();
    *p = malloc(size); if (!*p) return 2;
    host_allocs++; return 0;
}
CUresult cuMemFreeHost(void *p) { if (!initialised) return 3; free(p); host_allocs--; return 0; }

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    GUARD(); NEED_CTX();
    struct alloc *a = find(dst);
    if (!a || dst + n > a->ptr + a->size) return 1;
    if (a->backing) memcpy((char *)a->backing + (dst - a->ptr), src, n);
    sleep_s(n / (S.h2d * 1e9));
    return 0;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    GUARD(); NEED_CTX();
    struct alloc *a = find(src);
    if (!a || src + n > a->ptr + a->size) return 1;
    if (a->backing) memcpy(dst, (char *)a->backing + (src - a->ptr), n); else memset(dst, 0, n);
    sleep_s(n / (S.d2h * 1e9));
    return 0;
}
CUresult cuMemcpyPeer(CUdeviceptr dst, void *dctx, CUdeviceptr src, void *sctx, size_t n) {
    GUARD();
    (void)dctx; (void)sctx;
    struct alloc *a = find(dst), *b = find(src);
    if (!a || !b) return 1;
    sleep_s(n / ((S.p2p ? S.p2p_gbps : S.h2d / 2) * 1e9));
    return 0;
}

CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, void *o, void *v) {
    GUARD(); NEED_CTX();
    (void)n; (void)o; (void)v;
    const char *text = image;
    if (!strstr(text, ".version") || !strstr(text, ".target") || !strstr(text, ".entry")) return 218;
    for (int i = 0; i < 64; i++) if (!module_text[i]) {
        module_text[i] = strdup(text); module_dev[i] = current; modules++;
        *module = (void *)(uintptr_t)(0x2000 + i); return 0;
    }
    return 2;
}
CUresult cuModuleUnload(void *module) {
    if (!initialised) return 3;
    int i = (int)((uintptr_t)module - 0x2000);
    if (i < 0 || i >= 64 || !module_text[i]) return 400;
    free(module_text[i]); module_text[i] = NULL; modules--; return 0;
}
/* A function handle: module index * 16 + which entry (1 fill, 2 check, 3 burn). */
CUresult cuModuleGetFunction(void **fn, void *module, const char *name) {
    GUARD();
    int i = (int)((uintptr_t)module - 0x2000);
    if (i < 0 || i >= 64 || !module_text[i]) return 400;
    char wanted[160];
    snprintf(wanted, sizeof wanted, ".entry %s(", name);
    if (!strstr(module_text[i], wanted)) return 500;
    int which = !strcmp(name, "hc_fill") ? 1 : !strcmp(name, "hc_check") ? 2 : !strcmp(name, "hc_burn") ? 3 : 4;
    *fn = (void *)(uintptr_t)(0x10000 + i * 16 + which);
    return 0;
}
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    GUARD(); NEED_CTX();
    (void)gy; (void)gz; (void)by; (void)bz; (void)shared; (void)stream; (void)extra;
    if (gx == 0 || bx == 0 || bx > 1024) return 1;
    int which = (int)(((uintptr_t)fn - 0x10000) % 16);
    if (which == 2) {  /* hc_check(buf, words, seed, errors): count the scenario's bad words */
        CUdeviceptr errors = *(CUdeviceptr *)params[3];
        struct alloc *a = find(errors);
        if (!a) return 700;
        if (a->backing) *(uint32_t *)((char *)a->backing + (errors - a->ptr)) += S.bad_words;
        if (!strcmp(S.fail, "ecc")) sticky = 214;
    }
    if (which == 3) launches++;
    pending++;
    return 0;
}

/* For the tests: what is still allocated (device allocations, pinned host buffers, modules,
 * retained contexts), in one number each. */
void hcfake_live(int out[4]) {
    int n = 0, r = 0;
    for (int i = 0; i < MAX_ALLOCS; i++) n += A[i].ptr != 0;
    for (int d = 0; d < MAX_GPUS; d++) r += retained[d];
    out[0] = n; out[1] = host_allocs; out[2] = modules; out[3] = r;
}
