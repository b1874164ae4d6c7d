/* Test-only stand-in for Windows' bcryptprimitives.dll, which wine 8 lacks: the Rust standard
 * library gets its randomness (HashMap seeds) from its ProcessPrng. Built by the integration
 * tests (tests/integration/support/wine.rs) and placed beside the exe they run under wine;
 * never shipped. It asks advapi32's RtlGenRandom (SystemFunction036), which wine has.
 * No C runtime and no headers (`zig cc -nostdlib`): the few Windows types are spelled out. */
typedef int BOOL;
typedef unsigned char BOOLEAN;
typedef unsigned long ULONG;
typedef unsigned long long SIZE_T;
typedef unsigned char BYTE;

__declspec(dllimport) BOOLEAN __stdcall SystemFunction036(void *buffer, ULONG length);

BOOL __stdcall _DllMainCRTStartup(void *instance, ULONG reason, void *reserved) {
    (void)instance;
    (void)reason;
    (void)reserved;
    return 1;
}

__declspec(dllexport) BOOL __stdcall ProcessPrng(BYTE *data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return 0;
        }
        data += chunk;
        length -= chunk;
    }
    return 1;
}
