"""The child process of rknnlab.profile.fragmentation: one seeded malloc/free pattern
with glibc's own allocator, readings of mallinfo2 and RSS after each step, as JSON on
stdout.  Standard library only, started as a script, so that its heap holds nothing
but the interpreter's and the pattern's.

argv[1]: JSON {"pattern": "small" | "large" | "large_after_free", "blocks": int,
"seed": int, "small_max": int, "large_size": int, "keep_every": int}
"""
import ctypes
import ctypes.util
import json
import os
import random
import sys


class _mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def main() -> None:
    spec = json.loads(sys.argv[1])
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    libc.memset.restype = ctypes.c_void_p
    info = getattr(libc, "mallinfo2", None)
    if info is None:
        print(json.dumps({"error": "this C library has no mallinfo2 (glibc older than 2.33, or "
                                   "not glibc)"}))
        return
    info.restype = _mallinfo2
    libc.gnu_get_libc_version.restype = ctypes.c_char_p
    page = os.sysconf("SC_PAGE_SIZE")
    readings = []

    def reading(step: str) -> None:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * page
        m = info()
        readings.append({"step": step, "rss_bytes": rss, "arena_bytes": m.arena,
                         "in_use_bytes": m.uordblks, "free_kept_bytes": m.fordblks,
                         "top_free_bytes": m.keepcost, "mmapped_bytes": m.hblkhd,
                         "mmapped_blocks": m.hblks})

    rng = random.Random(spec["seed"])
    blocks = spec["blocks"]
    if spec["pattern"] == "small":
        sizes = [rng.randint(16, spec["small_max"]) for _ in range(blocks)]
    else:
        sizes = [spec["large_size"]] * blocks
    if spec["pattern"] == "large_after_free":
        # one large block freed first: glibc then raises its mmap threshold to that size
        warm = libc.malloc(spec["large_size"])
        libc.free(warm)
    libc.malloc_trim(0)
    reading("before")
    ptrs = []
    for size in sizes:
        p = libc.malloc(size)
        if not p:
            print(json.dumps({"error": f"malloc({size}) returned NULL"}))
            return
        libc.memset(p, 1, size)  # touch every page, so RSS counts it
        ptrs.append(p)
    reading("after malloc")
    keep = spec["keep_every"]
    kept = []
    for i, p in enumerate(ptrs):  # free all but every keep-th block, survivors spread over the heap
        if keep and i % keep == keep - 1:
            kept.append(p)
        else:
            libc.free(p)
    reading("after free")
    libc.malloc_trim(0)
    reading("after malloc_trim(0)")
    for p in kept:
        libc.free(p)
    print(json.dumps({"glibc": libc.gnu_get_libc_version().decode(), "readings": readings,
                      "allocated_bytes": sum(sizes), "kept_blocks": len(kept),
                      "kept_bytes": sum(s for i, s in enumerate(sizes) if keep and i % keep == keep - 1)}))


if __name__ == "__main__":
    main()
