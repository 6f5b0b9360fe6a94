"""The course's C examples compile against our own declarations of the C API
(tests/c_api/rknn_api.h) and run against the C test double of librknnrt.so."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "c"


@pytest.fixture(scope="module")
def output_reuse(rknn_double_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C examples cannot be built")
    exe = tmp_path_factory.mktemp("c_examples") / "output_reuse"
    subprocess.run([gcc, "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "tests" / "c_api"),
                    str(EXAMPLES / "output_reuse.c"), str(rknn_double_path),
                    f"-Wl,-rpath,{rknn_double_path.parent}", "-o", str(exe)], check=True)
    return exe


@pytest.fixture
def fake_model(tmp_path: Path) -> Path:
    model = tmp_path / "model.rknn"
    model.write_bytes(b"RKNN fake model for the C example")
    return model


def test_output_reuse_keeps_its_buffers_and_its_memory(output_reuse: Path, fake_model: Path):
    env = dict(os.environ, RKNN_DOUBLE_NO_LOG="1")   # the double's call log grows per call
    run = subprocess.run([str(output_reuse), str(fake_model), "20000"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "frames: 20000" in out
    assert "our buffers used on every frame: yes" in out
    assert "output follows input: yes" in out
    growth = int(re.search(r"growth: (-?\d+) kB", out).group(1))
    assert growth < 256, out   # 20,000 frames with a per-frame leak would add megabytes


def test_output_reuse_raw_outputs_are_sized_from_attr_size(output_reuse: Path, fake_model: Path):
    """want_float = 0: the buffer holds attr.size bytes (the output's own type), not n_elems x 4.
    The double's output 0 is 10 int8 scores: 10 bytes (40 would be n_elems x 4)."""
    env = dict(os.environ, RKNN_DOUBLE_NO_LOG="1")
    run = subprocess.run([str(output_reuse), str(fake_model), "50", "raw"], capture_output=True,
                         text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    assert "output 0: 10 elements, 10 bytes per get (its own type)" in run.stdout
    assert "our buffers used on every frame: yes" in run.stdout
    assert "output follows input: yes" in run.stdout


@pytest.mark.parametrize("mode", ["float", "raw"])
def test_output_reuse_pairs_every_get_with_one_release(output_reuse: Path, fake_model: Path,
                                                       tmp_path: Path, mode: str):
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if k != "RKNN_DOUBLE_NO_LOG"}
    env["RKNN_DOUBLE_LOG_FILE"] = str(log)
    run = subprocess.run([str(output_reuse), str(fake_model), "7", mode], capture_output=True,
                         text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    calls = [line.split(" ", 1)[0] for line in log.read_text().splitlines()]
    calls = [c for c in calls if c in ("rknn_outputs_get", "rknn_outputs_release", "rknn_destroy")]
    assert calls == ["rknn_outputs_get", "rknn_outputs_release"] * 7 + ["rknn_destroy"]


def test_output_reuse_refuses_an_unknown_mode(output_reuse: Path, fake_model: Path):
    run = subprocess.run([str(output_reuse), str(fake_model), "5", "int8"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and "usage" in run.stderr


def test_output_reuse_reports_a_bad_model(output_reuse: Path, tmp_path: Path):
    bad = tmp_path / "bad.rknn"
    bad.write_bytes(b"not a model")
    run = subprocess.run([str(output_reuse), str(bad), "1"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "rknn_init" in run.stderr and "-6" in run.stderr   # RKNN_ERR_MODEL_INVALID


def test_our_header_has_the_facts_sheet_layouts(tmp_path: Path):
    """tests/c_api/rknn_api.h and the test double declare the structs separately (the double
    keeps looser types for its own bookkeeping); the sizes pin both to the same ABI."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found")
    sizes = {"rknn_input_output_num": 8, "rknn_tensor_attr": 376, "rknn_mem_size": 64,
             "rknn_tensor_mem": 40, "rknn_input": 32, "rknn_output": 24, "rknn_init_extend": 136,
             "rknn_run_extend": 24, "rknn_output_extend": 8, "rknn_sdk_version": 512,
             "rknn_perf_run": 8, "rknn_custom_string": 1024, "rknn_perf_detail": 16,
             "rknn_input_range": 33040}
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include "rknn_api.h"\n' + "".join(
        f'_Static_assert(sizeof({name}) == {size}, "{name}");\n' for name, size in sizes.items())
        + '_Static_assert(offsetof(rknn_tensor_attr, size_with_stride) == 364, "size_with_stride");\n'
        + '_Static_assert(offsetof(rknn_output, buf) == 8, "rknn_output.buf");\n')
    subprocess.run([gcc, "-fsyntax-only", "-I", str(ROOT / "tests" / "c_api"), str(src)], check=True)


# --------------------------------------------------------------------------- mem_layers.c (lab 1)

def _build_example(name: str, double: Path, out_dir: Path) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C examples cannot be built")
    exe = out_dir / name
    subprocess.run([gcc, "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "tests" / "c_api"),
                    str(EXAMPLES / f"{name}.c"), str(double), f"-Wl,-rpath,{double.parent}", "-o", str(exe)],
                   check=True)
    return exe


@pytest.fixture(scope="module")
def mem_layers(rknn_double_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_example("mem_layers", rknn_double_path, tmp_path_factory.mktemp("c_examples"))


@pytest.fixture(scope="module")
def double_runtime(rknn_double_path: Path):
    """The same double, asked from Python: the numbers the program must print."""
    from rknnlab.rknn.native import NativeRuntime
    return NativeRuntime(rknn_double_path)


def _expected_io(rt, ctx) -> Dict[str, Any]:
    from rknnlab.rknn import abi
    num = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    lines, io = [], 0
    names = {abi.RKNN_TENSOR_NCHW: "NCHW", abi.RKNN_TENSOR_NHWC: "NHWC", abi.RKNN_TENSOR_NC1HWC2: "NC1HWC2"}
    for kind, cmd, n in (("input", abi.RKNN_QUERY_NATIVE_INPUT_ATTR, num.n_input),
                         ("output", abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, num.n_output)):
        for i in range(n):
            a = rt.query(ctx, cmd, abi.rknn_tensor_attr(index=i))
            dims = ", ".join(str(a.dims[d]) for d in range(a.n_dims))
            lines.append(f"{kind} {i}: native {names[a.fmt]} dims [{dims}], size {a.size}, "
                         f"size_with_stride {a.size_with_stride}, w_stride {a.w_stride}")
            io += a.size_with_stride
    return {"lines": lines, "io": io}


def _account(when: str, mem, io: int) -> str:
    planned = mem.total_weight_size + mem.total_internal_size + io
    return (f"{when:20s} weight {mem.total_weight_size} + internal {mem.total_internal_size} + io {io} = "
            f"{planned} B; DMA total {mem.total_dma_allocated_size} B; "
            f"remainder {mem.total_dma_allocated_size - planned} B")


def test_mem_layers_prints_the_account_the_runtime_gives(mem_layers: Path, fake_model: Path, double_runtime):
    """Every number is the double's own answer, asked again from Python: the native attrs of
    each io tensor, and weight + internal + io against the DMA total, at init and after a run."""
    from rknnlab.rknn import abi, buffers
    import numpy as np
    rt = double_runtime
    ctx = rt.init(str(fake_model))
    try:
        expected = _expected_io(rt, ctx)
        at_init = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
        plain = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
        zeros = np.zeros(tuple(plain.dims[d] for d in range(plain.n_dims)), np.uint8)
        rt.inputs_set(ctx, [buffers.input_from_array(0, zeros, abi.RKNN_TENSOR_NHWC)])
        rt.run(ctx)
        after_run = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    finally:
        rt.destroy(ctx)
    run = subprocess.run([str(mem_layers), str(fake_model)], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    assert out[0] == "runtime 0.0.1 (rknn_double), driver 0.0.0"
    assert out[1:1 + len(expected["lines"])] == expected["lines"]
    assert _account("after rknn_init:", at_init, expected["io"]) in out
    assert _account("after one rknn_run:", after_run, expected["io"]) in out
    # the double's native input rows are padded (w_stride 8 for a width of 4): io is not the plain sizes
    assert expected["io"] > sum(n for n in (48, 10, 16)) and "remainder 0 B" not in run.stdout


@pytest.mark.parametrize("mode, flag_name", [("internal", "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE"),
                                             ("all", "RKNN_FLAG_MEM_ALLOC_OUTSIDE")])
def test_mem_layers_compares_the_same_model_with_the_flag(mem_layers: Path, fake_model: Path, double_runtime,
                                                          mode: str, flag_name: str):
    from rknnlab.rknn import abi
    rt = double_runtime
    totals = {}
    for flag in (0, getattr(abi, flag_name)):
        ctx = rt.init(str(fake_model), flag)
        totals[flag] = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
        rt.destroy(ctx)
    plain, flagged = totals[0], totals[getattr(abi, flag_name)]
    run = subprocess.run([str(mem_layers), str(fake_model), mode], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
    assert run.returncode == 0, run.stderr
    moved = plain.total_dma_allocated_size - flagged.total_dma_allocated_size
    assert (f"{flag_name}: DMA total {flagged.total_dma_allocated_size} B; flag 0 minus this {moved} B "
            f"(internal {plain.total_internal_size} B, weight + internal "
            f"{plain.total_weight_size + plain.total_internal_size} B)") in run.stdout
    # what the difference teaches: the internal buffer, or everything the runtime allocated
    assert moved == (plain.total_internal_size if mode == "internal" else plain.total_dma_allocated_size)


def test_mem_layers_queries_again_after_a_run_and_destroys_every_context(mem_layers: Path, fake_model: Path,
                                                                         tmp_path: Path):
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if k != "RKNN_DOUBLE_NO_LOG"}
    env["RKNN_DOUBLE_LOG_FILE"] = str(log)
    run = subprocess.run([str(mem_layers), str(fake_model), "internal"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    calls = []
    for line in log.read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name == "rknn_query" and "cmd=6 " in rest + " ":
            calls.append("MEM_SIZE")
        elif name in ("rknn_init", "rknn_inputs_set", "rknn_run", "rknn_destroy"):
            calls.append(name)
    assert calls == ["rknn_init", "MEM_SIZE", "rknn_inputs_set", "rknn_run", "MEM_SIZE",
                     "rknn_init", "MEM_SIZE", "rknn_destroy", "rknn_destroy"]
    flags = re.findall(r"^rknn_init .*?flag=(0x[0-9a-f]+)", log.read_text(), re.M)
    assert flags == ["0x0", "0x200"]                  # flag 0, then RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE


def test_mem_layers_refuses_an_unknown_flag_and_reports_a_bad_model(mem_layers: Path, fake_model: Path,
                                                                    tmp_path: Path):
    run = subprocess.run([str(mem_layers), str(fake_model), "sram"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "usage" in run.stderr
    bad = tmp_path / "bad.rknn"
    bad.write_bytes(b"not a model")
    run = subprocess.run([str(mem_layers), str(bad)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "rknn_init" in run.stderr and "-6" in run.stderr   # RKNN_ERR_MODEL_INVALID


def test_mem_layers_texts_state_the_dma_total_as_decided() -> None:
    """DECISIONS 10' word for word in the README and the program's header; the extras only 'largely' cancel."""
    sentence = ("On a board, total_dma_allocated_size holds more than weights + internal + io. The runtime also "
                "allocates register-command and task buffers, and it rounds allocations to 4 KiB. User Guide §9.1.1 "
                "lists register config, and public librknnrt logs show these buffers. The io buffers may be allocated "
                "only at the first rknn_run. The simulator allocates exactly weights + internal + io at init "
                "(assumptions A9, A10).")
    for path in (EXAMPLES / "README.md", EXAMPLES / "mem_layers.c"):
        flat = " ".join(path.read_text().replace(" * ", " ").replace("`", "").split())
        assert sentence in flat.replace(".  ", ". "), path.name
        assert "largely cancel" in flat and "extras cancel" not in flat and "airockchip/rknn-toolkit2#129" in flat
