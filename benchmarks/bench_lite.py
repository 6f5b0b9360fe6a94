"""What the simulated RKNNLite costs against the C paths it stands beside.

    PYTHONPATH=lib python benchmarks/bench_lite.py [--model mobilenet_v2] [--iterations 300]

Runs, each in its own process on a simulated RK3588 (rknnlab.run): the C API's
alloc_per_call and prealloc_output, and rknn-toolkit-lite2's lite_inference,
lite_reuse_outputs and lite_gc_collect through rknnlab.lite.RKNNLite. Prints per
variant the median time per iteration, the time of the CPU-side calls inside it
(inputs_set, outputs_get, outputs_release) and the heap verdict; then, in this
process, what load_rknn adds to RSS against the file's size and that release()
leaves those bytes on the object (ASSUMPTIONS A65).
"""
from __future__ import annotations

import argparse
import gc
import os


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()

    import rknnlab
    from rknnlab import models
    from rknnlab.lite import RKNNLite

    variants = ["alloc_per_call", "prealloc_output", "lite_inference", "lite_reuse_outputs",
                "lite_gc_collect"]
    result = rknnlab.run(variants, model=args.model, iterations=args.iterations, backend="sim",
                         progress=False)
    print(f"{args.model}, {args.iterations} iterations, {result.source}")
    for name in variants:
        row = result.summary.loc[name]
        cpu = ", ".join(f"{f} {row[f + '_median_us']:.0f} us" for f in ("inputs_set", "outputs_get",
                                                                        "outputs_release"))
        print(f"- {name}: {row['iter_median_ms']:.2f} ms per iteration; {cpu}; heap: {row['heap_verdict']}")

    os.environ.setdefault("RKNNLAB_BACKEND", "sim")
    path = str(models.model_path(args.model, "rk3588"))
    size = os.path.getsize(path)
    gc.collect()
    before = rss_bytes()
    lite = RKNNLite()
    lite.load_rknn(path)
    loaded = rss_bytes()
    lite.init_runtime()  # its RSS is not printed: it includes the simulator's own ONNX twin
    lite.release()
    mib = 1024 * 1024
    print(f"RKNNLite on {os.path.basename(os.path.dirname(path))}/{os.path.basename(path)} "
          f"({size / mib:.2f} MiB): load_rknn +{(loaded - before) / mib:.2f} MiB RSS; after release() "
          f"rknn_data still holds {len(lite.rknn_data) / mib:.2f} MiB")


if __name__ == "__main__":
    main()
