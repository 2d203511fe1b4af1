/*
 * A stand-in for libnccl.so.2 (NCCL's C API) on machines without GPUs: the calls the self-test
 * makes, their signatures and result codes. HC_FAKE_NCCL="fail=system" makes the all-reduce
 * return ncclSystemError (2), whose message is the one NCCL prints ("unhandled system error").
 * hcfake_nccl_live() counts the communicators not destroyed.
 */
#include <stdlib.h>
#include <string.h>

static int live_comms;

int ncclGetVersion(int *v) { *v = 22105; return 0; }
const char *ncclGetErrorString(int code) {
    switch (code) {
    case 0: return "no error";
    case 1: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    default: return "unknown result code";
    }
}
int ncclCommInitAll(void **comms, int n, const int *devs) {
    if (n <= 0) return 4;
    for (int i = 0; i < n; i++) { comms[i] = (void *)(long)(0x3000 + devs[i]); live_comms++; }
    return 0;
}
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) {
    const char *env = getenv("HC_FAKE_NCCL");
    return env && strstr(env, "fail=system") ? 2 : 0;
}
int ncclAllReduce(unsigned long long s, unsigned long long r, unsigned long n, int type, int op, void *comm, void *stream) {
    (void)s; (void)r; (void)n; (void)op; (void)comm; (void)stream;
    return type == 7 ? 0 : 4;
}
int ncclCommDestroy(void *comm) { (void)comm; live_comms--; return 0; }
int hcfake_nccl_live(void) { return live_comms; }
