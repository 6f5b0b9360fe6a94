"""What the simulator's librknnrt.so for PCs costs a C program.

    PYTHONPATH=lib python benchmarks/bench_c_sim.py [--calls 20000] [--starts 5]

Builds one C program against the library (rknnlab.cc) and measures, in it:

- the embedded interpreter: RSS just before and just after the program's first call
  (Python, numpy and the simulator imported), and how long that first call takes;
- a call's own cost: rknn_query(RKNN_QUERY_IN_OUT_NUM) and rknn_mem_sync on a 4 KiB mem,
  each ``--calls`` times (no NPU time, no onnxruntime: only the way from C into the
  simulator and back);

then the same two calls through the simulator's Python API in this process, so the
difference is what crossing from C costs (taking the GIL, building the arguments,
mapping the structs).  Memory and the first call: the median of ``--starts`` program
runs; a call's cost: the fastest of the passes, from C and from Python alike.
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = r"""
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "rknn_api.h"

static long rss_kb(void)
{
    long total = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &total, &resident) != 2) return -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int calls = atoi(argv[2]);
    long before = rss_kb();
    double t0 = now();
    rknn_context ctx = 0;
    if (rknn_init(&ctx, argv[1], 0, 0, NULL)) return 2;
    double t1 = now();
    long after = rss_kb();
    rknn_input_output_num num;
    double q0 = now();
    for (int i = 0; i < calls; i++) rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &num, sizeof num);
    double q1 = now();
    rknn_tensor_mem *mem = rknn_create_mem(ctx, 4096);
    double s0 = now();
    for (int i = 0; i < calls; i++) rknn_mem_sync(ctx, mem, RKNN_MEMORY_SYNC_TO_DEVICE);
    double s1 = now();
    rknn_destroy_mem(ctx, mem);
    rknn_destroy(ctx);
    printf("%ld %.6f %.3f %.3f\n", after - before, t1 - t0, (q1 - q0) / calls * 1e6, (s1 - s0) / calls * 1e6);
    return 0;
}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()

    from rknnlab import cc, models
    from rknnlab.rknn import abi
    from rknnlab.sim import SimRuntime

    model = models.model_path(args.model, "rk3588")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "bench.c"
        source.write_text(PROGRAM)
        program = cc.compile_program(source, Path(tmp) / "bench", backend="sim")
        rows = []
        for _ in range(args.starts):
            done = cc.run_program(program, [str(model), str(args.calls)], timeout=600)
            if done.returncode:
                sys.exit(done.stderr)
            grown_kb, first_s, query_us, sync_us = (float(x) for x in done.stdout.split())
            rows.append((grown_kb, first_s, query_us, sync_us))

    rt = SimRuntime("rk3588")
    ctx = rt.init(str(model))
    info = abi.rknn_input_output_num()
    mem = rt.create_mem(ctx, 4096)
    py_query_us = py_sync_us = float("inf")
    for _ in range(args.starts):  # the fastest pass of each, as for the C columns
        t0 = time.perf_counter()
        for _ in range(args.calls):
            rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM, info)
        py_query_us = min(py_query_us, (time.perf_counter() - t0) / args.calls * 1e6)
        t0 = time.perf_counter()
        for _ in range(args.calls):
            rt.mem_sync(ctx, mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
        py_sync_us = min(py_sync_us, (time.perf_counter() - t0) / args.calls * 1e6)
    rt.destroy_mem(ctx, mem)
    rt.close()

    # memory and the first call: the median start; a call's cost: the fastest pass (the
    # least disturbed by other work on the machine), so the difference is the crossing
    med = [statistics.median(column) for column in zip(*rows)]
    med[2] = min(row[2] for row in rows)
    med[3] = min(row[3] for row in rows)
    print(f"{args.model} on the simulated RK3588, {args.starts} program starts, {args.calls:,} calls each "
          f"(Python {sys.version_info[0]}.{sys.version_info[1]}, {ctypes.sizeof(ctypes.c_void_p) * 8}-bit)")
    print(f"first call (rknn_init, Python started inside it): {med[1] * 1000:.0f} ms, "
          f"RSS +{med[0] / 1024:.1f} MB (Python, the simulator and the model's onnxruntime twin)")
    print(f"{'call':<42}{'from C (us)':>12}{'from Python (us)':>18}{'crossing (us)':>15}")
    for name, c_us, py_us in (("rknn_query(RKNN_QUERY_IN_OUT_NUM)", med[2], py_query_us),
                              ("rknn_mem_sync(4 KiB, TO_DEVICE)", med[3], py_sync_us)):
        print(f"{name:<42}{c_us:>12.2f}{py_us:>18.2f}{c_us - py_us:>15.2f}")


if __name__ == "__main__":
    main()
