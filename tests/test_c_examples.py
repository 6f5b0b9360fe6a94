"""The course's C examples compile against our own declarations of the C API
(lib/rknnlab/c/rknn_api.h) and run against the C test double of librknnrt.so."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "c"


@pytest.fixture(scope="module")
def output_reuse(rknn_double_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C examples cannot be built")
    exe = tmp_path_factory.mktemp("c_examples") / "output_reuse"
    subprocess.run([gcc, "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "lib" / "rknnlab" / "c"),
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
    """lib/rknnlab/c/rknn_api.h and the test double declare the structs separately (the double
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
    subprocess.run([gcc, "-fsyntax-only", "-I", str(ROOT / "lib" / "rknnlab" / "c"), str(src)], check=True)


# --------------------------------------------------------------------------- mem_layers.c (lab 1)

def _build_example(name: str, double: Path, out_dir: Path) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C examples cannot be built")
    exe = out_dir / name
    subprocess.run([gcc, "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "lib" / "rknnlab" / "c"),
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


# --------------------------------------------------------------------------- lifecycle.c (chapter 2)

LOAD_WAYS = ["path", "buffer", "zerocopy"]


@pytest.fixture(scope="module")
def lifecycle(rknn_double_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_example("lifecycle", rknn_double_path, tmp_path_factory.mktemp("c_examples"))


def _run_logged(exe: Path, args, log: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RKNN_DOUBLE_NO_LOG"}
    env["RKNN_DOUBLE_LOG_FILE"] = str(log)
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=60, env=env)


def _log_calls(log: Path):
    """The double's call log as (function, {key: value}) in call order (array elements left out)."""
    calls = []
    for line in log.read_text().splitlines():
        name, _, rest = line.partition(" ")
        if "[" not in name:
            calls.append((name, dict(re.findall(r"(\w+)=(\S*)", rest))))
    return calls


def _init_as(rt, model: Path, way: str):
    """A context of ``model`` made the way the program makes it; (ctx, the zero-copy model mem or None)."""
    from rknnlab.rknn import abi, buffers
    import numpy as np
    data = model.read_bytes()
    if way == "path":
        return rt.init(str(model)), None
    if way == "buffer":
        return rt.init(data), None
    mem = rt.create_mem2(0, len(data), abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    buffers.mem_view(mem)[:len(data)] = np.frombuffer(data, np.uint8)
    extend = abi.rknn_init_extend(real_model_offset=0, real_model_size=len(data), model_buffer_fd=mem.contents.fd)
    return rt.init(mem.contents.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend=extend,
                   size=len(data)), mem


def _dma(rt, ctx) -> int:
    from rknnlab.rknn import abi
    return rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size


def _step(out: str, step: str) -> Dict[str, int]:
    """{"dma": ..., "rss": ...} of the step line (dma -1 when the line says no context)."""
    match = re.search(rf"^{re.escape(step)} +(?:DMA total (\d+) B|no context), RSS (\d+) kB$", out, re.M)
    assert match, f"no line for {step!r} in:\n{out}"
    return {"dma": int(match.group(1)) if match.group(1) else -1, "rss": int(match.group(2))}


def test_lifecycle_info_asks_the_sizes_from_a_model_info_context(lifecycle: Path, fake_model: Path,
                                                                 double_runtime, tmp_path: Path):
    from rknnlab.rknn import abi
    rt = double_runtime
    info_flags = abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY | abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE
    ctx = rt.init(str(fake_model), info_flags)
    try:
        info = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    finally:
        rt.destroy(ctx)
    ctx = rt.init(str(fake_model))
    plain_dma = _dma(rt, ctx)
    rt.destroy(ctx)
    log = tmp_path / "calls.log"
    run = _run_logged(lifecycle, ["info", fake_model], log)
    assert run.returncode == 0, run.stderr
    assert (f"model info only: weights {info.total_weight_size} B, internal {info.total_internal_size} B, "
            f"DMA total {info.total_dma_allocated_size} B") in run.stdout
    assert info.total_dma_allocated_size < plain_dma   # the dummy context did not pay for the model
    _step(run.stdout, "after rknn_destroy:")
    calls = _log_calls(log)
    assert [name for name, _ in calls] == ["rknn_init", "rknn_query", "rknn_destroy"]
    # both flags: the API reference asks MEM_ALLOC_OUTSIDE for RKNN_QUERY_MEM_SIZE (p.26)
    assert int(calls[0][1]["flag"], 16) == info_flags == 0x110 and calls[0][1]["size"] == "0"   # from the path
    assert calls[1][1]["cmd"] == str(abi.RKNN_QUERY_MEM_SIZE)


@pytest.mark.parametrize("way", LOAD_WAYS)
def test_lifecycle_prints_the_runtime_account_after_each_step(lifecycle: Path, fake_model: Path, double_runtime,
                                                              way: str):
    """The DMA totals are the double's own answers for a context made the same way, after init and
    after a frame; every step has an RSS reading."""
    rt = double_runtime
    ctx, mem = _init_as(rt, fake_model, way)
    try:
        at_init = _dma(rt, ctx)
        _frame_output_bytes(rt, ctx, 0)
        after_frames = _dma(rt, ctx)
    finally:
        rt.destroy(ctx)
        if mem is not None:
            rt.destroy_mem(0, mem)
    run = subprocess.run([str(lifecycle), way, str(fake_model), "25"], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert _step(out, "after rknn_init:")["dma"] == at_init
    assert _step(out, "after 25 frames:")["dma"] == after_frames
    assert "outputs_get 25, outputs_release 25" in out
    assert _step(out, "after rknn_destroy:")["dma"] == -1
    first = {"path": "before rknn_init:", "buffer": "file read into a buffer:",
             "zerocopy": "model copied into it:"}[way]
    steps = [first, "after rknn_init:", "after 25 frames:", "after rknn_destroy:"]
    if way == "buffer":
        steps.insert(2, "after free(model buffer):")
        assert _step(out, "after free(model buffer):")["dma"] == at_init
    if way == "zerocopy":
        steps.append("after rknn_destroy_mem:")
        size = fake_model.stat().st_size
        assert re.search(rf"^model mem: {size} B, fd \d+ \(yours until after rknn_destroy\)$", out, re.M)
    printed = [line.split("  ")[0].rstrip() for line in out.splitlines() if "RSS" in line]
    assert printed == steps
    assert all(_step(out, s)["rss"] > 0 for s in steps)


def test_lifecycle_zero_copy_saves_the_weights_the_double_reports(lifecycle: Path, fake_model: Path,
                                                                  double_runtime):
    """Between a path and a zero-copy init the DMA totals differ by what the double says the weights are."""
    from rknnlab.rknn import abi
    env = dict(os.environ, RKNN_DOUBLE_NO_LOG="1")
    totals = {}
    for way in ("path", "zerocopy"):
        run = subprocess.run([str(lifecycle), way, str(fake_model), "1"], capture_output=True, text=True,
                             timeout=60, env=env)
        assert run.returncode == 0, run.stderr
        totals[way] = _step(run.stdout, "after rknn_init:")["dma"]
    ctx = double_runtime.init(str(fake_model))
    weights = double_runtime.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_weight_size
    double_runtime.destroy(ctx)
    assert totals["path"] - totals["zerocopy"] == weights > 0


@pytest.mark.parametrize("way", LOAD_WAYS)
def test_lifecycle_loads_the_model_as_its_mode_says(lifecycle: Path, fake_model: Path, tmp_path: Path, way: str):
    log = tmp_path / "calls.log"
    run = _run_logged(lifecycle, [way, fake_model, "2"], log)
    assert run.returncode == 0, run.stderr
    calls = _log_calls(log)
    init = [fields for name, fields in calls if name == "rknn_init"]
    assert len(init) == (2 if way == "zerocopy" else 1)   # zerocopy: and the path-loaded one it compares with
    size = fake_model.stat().st_size
    if way == "path":
        assert (init[0]["size"], init[0]["flag"], init[0]["path"]) == ("0", "0x0", str(fake_model))
    elif way == "buffer":
        assert (init[0]["size"], init[0]["flag"], init[0]["ext"]) == (str(size), "0x0", "0")
    else:
        assert calls[0] == ("rknn_create_mem2", {"ctx": "0", "size": str(size), "alloc_flags": "0x20000"})
        assert (init[0]["size"], init[0]["flag"], init[0]["ext"]) == (str(size), "0x10000", "1")
        assert (init[0]["ext_offset"], init[0]["ext_size"]) == ("0", str(size))
        fd = re.search(r"^model mem: \d+ B, fd (\d+)", run.stdout, re.M).group(1)
        assert init[0]["ext_fd"] == fd != "0"    # the mem's own fd, which the double checks too


@pytest.mark.parametrize("way", LOAD_WAYS)
def test_lifecycle_sets_inputs_before_every_run_and_pairs_every_get(lifecycle: Path, fake_model: Path,
                                                                    tmp_path: Path, double_runtime, way: str):
    from rknnlab.rknn import abi
    log = tmp_path / "calls.log"
    run = _run_logged(lifecycle, [way, fake_model, "7"], log)
    assert run.returncode == 0, run.stderr
    calls = _log_calls(log)
    first = next(fields["ctx"] for name, fields in calls if name == "rknn_inputs_set")   # the context loaded `way`
    names = [name for name, fields in calls if fields.get("ctx") == first and name in
             ("rknn_inputs_set", "rknn_run", "rknn_outputs_get", "rknn_outputs_release", "rknn_destroy")]
    assert names == ["rknn_inputs_set", "rknn_run", "rknn_outputs_get", "rknn_outputs_release"] * 7 + ["rknn_destroy"]
    # our buffers, allocated once: the same pointers every frame, sized n_elems x 4 (want_float = 1)
    rt = double_runtime
    ctx = rt.init(str(fake_model))
    need = {i: rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i)).n_elems * 4
            for i in range(rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output)}
    rt.destroy(ctx)
    gets = _outputs_got(log)
    assert len(gets[first]) == 7 * len(need)
    # zerocopy also runs one frame on a path-loaded context, with buffers of its own
    assert len(gets) == (2 if way == "zerocopy" else 1)
    for ctx_gets in gets.values():
        assert {(int(i), int(size)) for i, _, _, _, size in ctx_gets} == set(need.items())
        assert {(w, p) for _, w, p, _, _ in ctx_gets} == {("1", "1")}
        assert len({buf for _, _, _, buf, _ in ctx_gets}) == len(need)
    assert len({buf for ctx_gets in gets.values() for _, _, _, buf, _ in ctx_gets}) == len(gets) * len(need)


def _outputs_got(log: Path) -> Dict[str, list]:
    """{ctx: [(index, want_float, is_prealloc, buf, size) of every rknn_outputs_get element]}."""
    gets: Dict[str, list] = {}
    ctx = None
    for line in log.read_text().splitlines():
        head = re.match(r"^rknn_outputs_get ctx=(\d+) ", line)
        if head:
            ctx = head.group(1)
        element = re.match(r"^rknn_outputs_get\[\d+\] index=(\d+) want_float=(\d) is_prealloc=(\d) buf=(\S+) "
                           r"size=(\d+)$", line)
        if element:
            gets.setdefault(ctx, []).append(element.groups())
    return gets


def test_lifecycle_destroys_the_zero_copy_model_mem_after_its_context(lifecycle: Path, fake_model: Path,
                                                                      tmp_path: Path):
    """The runtime reads that mem in place until rknn_destroy (API reference p.20): the mem made
    with ctx 0 is destroyed once, with ctx 0, after the context, and nothing comes after it."""
    log = tmp_path / "calls.log"
    run = _run_logged(lifecycle, ["zerocopy", fake_model, "3"], log)
    assert run.returncode == 0, run.stderr
    calls = _log_calls(log)
    names = [name for name, _ in calls]
    # two contexts: the zero-copy one, and the path-loaded one it is compared with
    assert names.count("rknn_destroy_mem") == 1 and names.count("rknn_destroy") == 2
    assert names.index("rknn_create_mem2") < names.index("rknn_init")
    assert names[-2:] == ["rknn_destroy", "rknn_destroy_mem"]
    zero_copy_ctx = next(fields["ctx"] for name, fields in calls if name == "rknn_query")   # first after its init
    assert calls[-2][1]["ctx"] == zero_copy_ctx
    assert calls[-1][1]["ctx"] == "0"


def _frame_output_bytes(rt, ctx, value: int) -> bytes:
    """One frame as the program runs it (uint8 inputs whose pixels are all ``value``, float32
    outputs into our buffers, one release); returns the outputs' bytes."""
    from rknnlab.rknn import abi, buffers
    import numpy as np
    num = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    inputs = []
    for i in range(num.n_input):
        a = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=i))
        pixels = np.full(tuple(a.dims[d] for d in range(a.n_dims)), value, np.uint8)
        inputs.append(buffers.input_from_array(i, pixels, abi.RKNN_TENSOR_NHWC))
    rt.inputs_set(ctx, inputs)
    rt.run(ctx)
    ours = [np.zeros(rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i)).n_elems, np.float32)
            for i in range(num.n_output)]
    outputs = [abi.rknn_output(index=i, want_float=1, is_prealloc=1, buf=b.ctypes.data, size=b.nbytes)
               for i, b in enumerate(ours)]
    rt.outputs_get(ctx, outputs)
    rt.outputs_release(ctx, outputs)
    return b"".join(b.tobytes() for b in ours)


COMPARED = r"^outputs of frame (\d+), zero-copy vs path: (?:identical \((\d+) bytes\)|DIFFER in (\d+) of (\d+) bytes .*)$"


def test_lifecycle_zero_copy_compares_its_outputs_with_a_path_context(lifecycle: Path, fake_model: Path,
                                                                      double_runtime, tmp_path: Path):
    """The last frame again on a context loaded from the path, while the zero-copy context still
    lives; the double computes both alike, so the outputs are identical."""
    rt = double_runtime
    ctx = rt.init(str(fake_model))
    try:
        expected = _frame_output_bytes(rt, ctx, 4)
    finally:
        rt.destroy(ctx)
    log = tmp_path / "calls.log"
    run = _run_logged(lifecycle, ["zerocopy", fake_model, "5"], log)
    assert run.returncode == 0, run.stderr
    compared = re.findall(COMPARED, run.stdout, re.M)
    assert compared == [("4", str(len(expected)), "", "")]
    lines = run.stdout.splitlines()
    assert lines.index(next(line for line in lines if line.startswith("outputs of frame"))) \
        < lines.index(next(line for line in lines if line.startswith("after rknn_destroy:")))
    calls = _log_calls(log)
    inits = [(k, fields) for k, (name, fields) in enumerate(calls) if name == "rknn_init"]
    assert len(inits) == 2
    (_, zero_copy), (second, by_path) = inits
    assert zero_copy["flag"] == "0x10000"
    assert (by_path["size"], by_path["flag"], by_path["path"]) == ("0", "0x0", str(fake_model))
    zero_copy_ctx = calls[inits[0][0] + 1][1]["ctx"]
    path_ctx = calls[second + 1][1]["ctx"]
    assert path_ctx != zero_copy_ctx
    # after the zero-copy context's frames, before its rknn_destroy: one frame, then the path context goes
    on_zero_copy = [k for k, (name, fields) in enumerate(calls) if fields.get("ctx") == zero_copy_ctx]
    destroy_zero_copy = next(k for k in on_zero_copy if calls[k][0] == "rknn_destroy")
    last_release = max(k for k in on_zero_copy if calls[k][0] == "rknn_outputs_release")
    assert last_release < second < destroy_zero_copy
    on_path = [name for name, fields in calls[second + 1:destroy_zero_copy] if fields.get("ctx") == path_ctx]
    assert [n for n in on_path if n != "rknn_query"] == ["rknn_inputs_set", "rknn_run", "rknn_outputs_get",
                                                          "rknn_outputs_release", "rknn_destroy"]
    assert run.stdout.count("zero-copy vs path") == 1
    for way in ("path", "buffer"):   # only zerocopy compares
        other = subprocess.run([str(lifecycle), way, str(fake_model), "2"], capture_output=True, text=True,
                               timeout=60, env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
        assert other.returncode == 0 and "zero-copy vs path" not in other.stdout


def test_lifecycle_comparison_reports_outputs_that_differ(rknn_double_path: Path, fake_model: Path,
                                                          double_runtime, tmp_path: Path):
    """A copy of the program whose path-loaded context runs the next frame instead: the comparison
    must say that the outputs differ, and in how many bytes (the double's own outputs for both)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C examples cannot be built")
    source = (EXAMPLES / "lifecycle.c").read_text()
    same_frame = "run_frames(ctx, &theirs, frame, 1)"
    assert source.count(same_frame) == 1
    shifted = tmp_path / "lifecycle_next_frame.c"
    shifted.write_text(source.replace(same_frame, "run_frames(ctx, &theirs, frame + 1, 1)"))
    exe = tmp_path / "lifecycle_next_frame"
    subprocess.run([gcc, "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "lib" / "rknnlab" / "c"),
                    str(shifted), str(rknn_double_path), f"-Wl,-rpath,{rknn_double_path.parent}", "-o", str(exe)],
                   check=True)
    rt = double_runtime
    ctx = rt.init(str(fake_model))
    try:
        frame2, frame3 = _frame_output_bytes(rt, ctx, 2), _frame_output_bytes(rt, ctx, 3)
    finally:
        rt.destroy(ctx)
    differ = sum(a != b for a, b in zip(frame2, frame3))
    assert 0 < differ < len(frame2)
    run = subprocess.run([str(exe), "zerocopy", str(fake_model), "3"], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
    assert run.returncode == 0, run.stderr
    assert re.findall(COMPARED, run.stdout, re.M) == [("2", "", str(differ), str(len(frame2)))]


@pytest.mark.parametrize("way", ["path", "zerocopy"])
def test_lifecycle_dup_sums_the_dma_total_over_the_contexts(lifecycle: Path, fake_model: Path, double_runtime,
                                                            tmp_path: Path, way: str):
    rt = double_runtime
    ctx, mem = _init_as(rt, fake_model, way)
    contexts, sums = [ctx], []
    try:
        for k in range(4):
            if k:
                contexts.append(rt.dup_context(ctx))
            _frame_output_bytes(rt, contexts[-1], 0)
            sums.append(sum(_dma(rt, c) for c in contexts))
    finally:
        for c in reversed(contexts):
            rt.destroy(c)
        if mem is not None:
            rt.destroy_mem(0, mem)
    log = tmp_path / "calls.log"
    run = _run_logged(lifecycle, ["dup", fake_model, "4", way], log)
    assert run.returncode == 0, run.stderr
    printed = [(int(n), int(total), int(added)) for n, total, added in
               re.findall(r"^contexts +(\d+) \((?:rknn_init|\+ rknn_dup_context)\): +DMA total (\d+) B "
                          r"\(\+(\d+) B\), RSS \d+ kB$", run.stdout, re.M)]
    assert printed == [(n + 1, s, s - (sums[n - 1] if n else 0)) for n, s in enumerate(sums)]
    # a duplicate shares the weights: it adds less than an init from a path allocates (with a
    # zero-copy model no context allocates weights, so each adds the same)
    assert (sums[1] - sums[0] < sums[0]) if way == "path" else (sums[1] - sums[0] == sums[0])
    calls = _log_calls(log)
    names = [name for name, _ in calls]
    assert names.count("rknn_init") == 1 and names.count("rknn_dup_context") == 3
    # teardown: the duplicates, then the context they were made from, then the shared model mem
    made = [fields["in"] for name, fields in calls if name == "rknn_dup_context"]
    destroyed = [fields["ctx"] for name, fields in calls if name == "rknn_destroy"]
    assert len(destroyed) == 4 and destroyed[-1] == made[0] and len(set(destroyed)) == 4
    tail = names[names.index("rknn_destroy"):]
    assert tail == ["rknn_destroy"] * 4 + (["rknn_destroy_mem"] if way == "zerocopy" else [])


@pytest.mark.parametrize("args", [["info"], ["path"], ["buffer"], ["zerocopy"], ["dup", "2"]],
                         ids=lambda a: a[0])
def test_lifecycle_reports_a_bad_model_and_frees_what_it_got(lifecycle: Path, tmp_path: Path, args):
    bad = tmp_path / "bad.rknn"
    bad.write_bytes(b"not a model")
    log = tmp_path / "calls.log"
    run = _run_logged(lifecycle, [args[0], bad, *args[1:]], log)
    assert run.returncode == 1
    assert "rknn_init" in run.stderr and "-6 (RKNN_ERR_MODEL_INVALID)" in run.stderr
    names = [name for name, _ in _log_calls(log)]
    assert names[-1] == ("rknn_destroy_mem" if args[0] == "zerocopy" else "rknn_init")   # the model mem too


def test_lifecycle_refuses_an_unknown_mode_and_bad_counts(lifecycle: Path, fake_model: Path, tmp_path: Path):
    for args in (["copy", fake_model], ["path", fake_model, "0"], ["dup", fake_model, "0"],
                 ["dup", fake_model, "2", "mmap"], ["info", fake_model, "3"], ["info"]):
        run = subprocess.run([str(lifecycle), *map(str, args)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "usage" in run.stderr, args
    assert "unknown mode 'copy'" in subprocess.run([str(lifecycle), "copy", str(fake_model)], capture_output=True,
                                                   text=True, timeout=60).stderr
    run = subprocess.run([str(lifecycle), "buffer", str(tmp_path / "missing.rknn")], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and "cannot open" in run.stderr


# --------------------------------------------------------------------------- phases.c (chapter 3)

PHASE_ROWS = ["rknn_inputs_set", "rknn_run", "rknn_outputs_get", "rknn_outputs_release",
              "whole frame (the four calls)", "run_duration (RKNN_QUERY_PERF_RUN)"]
ROW = re.compile(r"^(.+?) +(-?\d+\.\d{3}) +(-?\d+\.\d{3}) +(-?\d+\.\d{3}) +(-?\d+\.\d{3})$")


@pytest.fixture(scope="module")
def phases(rknn_double_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_example("phases", rknn_double_path, tmp_path_factory.mktemp("c_examples"))


def _phase_tables(out: str) -> Dict[int, Dict[str, tuple]]:
    """{want_float: {row name: (median, min, max, first)}} of the two passes' tables."""
    tables: Dict[int, Dict[str, tuple]] = {}
    current = None
    for line in out.splitlines():
        head = re.match(r"^pass (\d) of 2: rknn_outputs_get with want_float = (\d) ", line)
        if head:
            current = tables.setdefault(int(head.group(2)), {})
            continue
        row = ROW.match(line)
        if row and current is not None:
            current[row.group(1)] = tuple(float(v) for v in row.groups()[1:])
    return tables


def _perf_detail_of_the_double(rt, model: Path, mask=None) -> str:
    """The double's PERF_DETAIL text after one run, asked from Python as phases.c asks it."""
    from rknnlab.rknn import abi
    ctx = rt.init(str(model), abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        if mask is not None:
            rt.set_core_mask(ctx, mask)
        _frame_output_bytes(rt, ctx, 0)
        return rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL).text()
    finally:
        rt.destroy(ctx)


def test_phases_times_the_four_calls_of_every_frame_in_two_passes(phases: Path, fake_model: Path,
                                                                 double_runtime, tmp_path: Path):
    from rknnlab.rknn import abi
    rt = double_runtime
    ctx = rt.init(str(fake_model))
    try:
        attrs = [rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i))
                 for i in range(rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output)]
        plain_input = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
        _frame_output_bytes(rt, ctx, 0)
        run_duration_ms = rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration / 1e3
    finally:
        rt.destroy(ctx)
    log = tmp_path / "calls.log"
    run = _run_logged(phases, [fake_model, "--frames", "9"], log)
    assert run.returncode == 0, run.stderr
    tables = _phase_tables(run.stdout)
    assert sorted(tables) == [0, 1] and all(list(t) == PHASE_ROWS for t in tables.values())
    for table in tables.values():
        for name, (median, low, high, first) in table.items():
            assert low <= median <= high and low <= first <= high, name
        calls = [table[name] for name in PHASE_ROWS[:4]]
        # the whole frame is the four calls of the same frame, on the same clock
        assert table[PHASE_ROWS[4]][1] >= sum(c[1] for c in calls) - 0.004
        assert table[PHASE_ROWS[4]][2] <= sum(c[2] for c in calls) + 0.004
        assert table[PHASE_ROWS[5]] == (run_duration_ms,) * 4   # the double's PERF_RUN, every frame
    assert re.search(r"^rknn_outputs_get, want_float = 1 minus want_float = 0 \(medians\): [+-]\d+\.\d{3} ms$",
                     run.stdout, re.M)
    assert "Network Layer Information Table" not in run.stdout

    # the calls: each frame sets the input, runs, gets, releases and asks PERF_RUN; nothing else
    calls = _log_calls(log)
    init = next(fields for name, fields in calls if name == "rknn_init")
    assert (init["size"], init["flag"], init["path"]) == ("0", "0x0", str(fake_model))
    frame = ["rknn_inputs_set", "rknn_run", "rknn_outputs_get", "rknn_outputs_release", "PERF_RUN"]
    names = ["PERF_RUN" if name == "rknn_query" and fields["cmd"] == "4" else name
             for name, fields in calls if name != "rknn_query" or fields["cmd"] in ("3", "4")]
    assert names == ["rknn_init"] + frame * 18 + ["rknn_destroy"]
    assert "rknn_set_core_mask" not in names
    # a uint8 NHWC image of the model's input size, converted by the runtime
    inputs = re.findall(r"^rknn_inputs_set\[0\] index=0 buf=(\S+) size=(\d+) pass_through=(\d) type=(\d+) "
                        r"fmt=(\d+)$", log.read_text(), re.M)
    assert len(inputs) == 18 and len({buf for buf, *_ in inputs}) == 1
    assert {tuple(i[1:]) for i in inputs} == {(str(plain_input.n_elems), "0", str(abi.RKNN_TENSOR_UINT8),
                                               str(abi.RKNN_TENSOR_NHWC))}
    # pass 1: want_float = 0 into attr.size bytes; pass 2: want_float = 1 into n_elems x 4 bytes;
    # is_prealloc = 1 into buffers allocated once (one per output and pass)
    gets = _outputs_got(log)
    (elements,) = gets.values()
    assert len(elements) == 18 * len(attrs)
    half = 9 * len(attrs)
    for pass_elements, want_float in ((elements[:half], "0"), (elements[half:], "1")):
        sizes = {int(i): (a.size if want_float == "0" else a.n_elems * 4)
                 for i, a in ((str(k), a) for k, a in enumerate(attrs))}
        assert {(int(i), int(size)) for i, _, _, _, size in pass_elements} == set(sizes.items())
        assert {(w, p) for _, w, p, _, _ in pass_elements} == {(want_float, "1")}
        assert len({buf for _, _, _, buf, _ in pass_elements}) == len(attrs)
    assert len({buf for _, _, _, buf, _ in elements}) == 2 * len(attrs)
    assert attrs[0].size != attrs[0].n_elems * 4      # so the two passes' sizes can tell them apart


def test_phases_puts_each_call_s_time_in_its_own_row(phases: Path, fake_model: Path):
    """The double sleeps in the calls the test names: each row must show its own call's sleep, and
    want_float = 1 the extra sleep of a float get.  rknn_run's k-th call sleeps 1 + 3 k ms, so its
    median, min, max and first frame differ and each must be the right one.  A sleep is never
    shorter than asked; a busy machine can make one much longer, so the program gets three tries
    (a wrong statistic is wrong by milliseconds on every try)."""
    delays_ms = {"rknn_inputs_set": 3.0, "rknn_outputs_get": 1.0, "rknn_outputs_release": 4.0}
    float_extra_ms = 2.0
    spec = ",".join(f"{call}={round(ms * 1000)}" for call, ms in delays_ms.items() if ms)
    env = dict(os.environ, RKNN_DOUBLE_NO_LOG="1",
               RKNN_DOUBLE_DELAY_US=f"{spec},rknn_run=1000+3000,rknn_outputs_get_float={round(float_extra_ms * 1000)}")
    frames = 7
    slack, one_frame_slack = 2.0, 4.0    # ms a busy machine may add to a sleep: a median, a single frame

    def check(out: str) -> None:
        tables = _phase_tables(out)
        assert sorted(tables) == [0, 1]
        for want_float, table in tables.items():
            for call, ms in delays_ms.items():
                expected = ms + (float_extra_ms if call == "rknn_outputs_get" and want_float else 0.0)
                median, low = table[call][0], table[call][1]
                assert expected <= low and median <= expected + slack, (want_float, call, table[call])
            run_ms = [1.0 + 3.0 * k for k in range(want_float * frames, (want_float + 1) * frames)]
            median, low, high, first = table["rknn_run"]
            assert run_ms[frames // 2] <= median <= run_ms[frames // 2] + slack, table["rknn_run"]
            assert run_ms[0] <= low <= run_ms[0] + slack, table["rknn_run"]
            assert run_ms[0] <= first <= run_ms[0] + one_frame_slack, table["rknn_run"]
            assert run_ms[-1] <= high <= run_ms[-1] + one_frame_slack, table["rknn_run"]
            assert sum(delays_ms.values()) + run_ms[0] <= table["whole frame (the four calls)"][1]
        extra = float(re.search(r"want_float = 0 \(medians\): ([+-]\d+\.\d{3}) ms", out).group(1))
        assert float_extra_ms - slack <= extra <= float_extra_ms + slack, extra

    failures = []
    for _ in range(3):
        run = subprocess.run([str(phases), str(fake_model), "--frames", str(frames)], capture_output=True,
                             text=True, timeout=60, env=env)
        assert run.returncode == 0, run.stderr
        try:
            check(run.stdout)
            break
        except AssertionError as failure:
            failures.append(f"{failure}\n{run.stdout}")
    else:
        pytest.fail("three tries, three wrong tables:\n" + "\n".join(failures))


@pytest.mark.parametrize("mask", [None, 3, 7])
def test_phases_perf_prints_the_runtime_s_per_layer_text(phases: Path, fake_model: Path, double_runtime,
                                                        tmp_path: Path, mask):
    from rknnlab import profile
    expected = _perf_detail_of_the_double(double_runtime, fake_model, mask)
    log = tmp_path / "calls.log"
    args = [fake_model, "--perf", "--frames", "3"] + (["--core-mask", hex(mask)] if mask else [])
    run = _run_logged(phases, args, log)
    assert run.returncode == 0, run.stderr
    head = f"RKNN_QUERY_PERF_DETAIL after the last run (data_len {len(expected)}):\n"
    assert run.stdout.endswith(head + expected)       # as the runtime wrote it, and last
    table = profile.parse_perf_detail(run.stdout[run.stdout.index(head) + len(head):])
    conv = table[table.op.isin(["ConvRelu", "Conv"])]
    assert set(conv.cores) == {1 if mask is None else bin(mask).count("1")}
    assert "init flag 0x8: RKNN_FLAG_COLLECT_PERF_MASK" in run.stdout

    calls = _log_calls(log)
    names = [name if name != "rknn_query" else f"query {fields['cmd']}" for name, fields in calls]
    assert next(fields for name, fields in calls if name == "rknn_init")["flag"] == "0x8"
    # the mask before the first frame; PERF_DETAIL once, after the last run, before rknn_destroy
    if mask:
        assert [f["mask"] for n, f in calls if n == "rknn_set_core_mask"] == [hex(mask)]
        assert names.index("rknn_set_core_mask") < names.index("rknn_inputs_set")
    else:
        assert "rknn_set_core_mask" not in names
    assert names.count("query 3") == 1
    last_run = len(names) - 1 - names[::-1].index("rknn_run")
    assert last_run < names.index("query 3") < names.index("rknn_destroy") == len(names) - 1


def test_phases_reports_a_refused_perf_detail_and_still_destroys_the_context(phases: Path, rknn_double_path: Path,
                                                                           fake_model: Path, tmp_path: Path):
    """A copy of the program that forgets the flag: the runtime refuses RKNN_QUERY_PERF_DETAIL, and the
    program says so, with the code, the flag it needs and the flag the context was made with."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C examples cannot be built")
    source = (EXAMPLES / "phases.c").read_text()
    with_flag = "uint32_t flag = perf ? RKNN_FLAG_COLLECT_PERF_MASK : 0;"
    assert source.count(with_flag) == 1
    forgetful = tmp_path / "phases_without_flag.c"
    forgetful.write_text(source.replace(with_flag, "uint32_t flag = 0; (void)perf;"))
    exe = tmp_path / "phases_without_flag"
    subprocess.run([gcc, "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "lib" / "rknnlab" / "c"),
                    str(forgetful), str(rknn_double_path), f"-Wl,-rpath,{rknn_double_path.parent}", "-o", str(exe)],
                   check=True)
    log = tmp_path / "calls.log"
    run = _run_logged(exe, [fake_model, "--perf", "--frames", "2"], log)
    assert run.returncode == 1
    assert "phases: rknn_query(RKNN_QUERY_PERF_DETAIL) failed: -5 (RKNN_ERR_PARAM_INVALID)" in run.stderr
    assert "only for a context made with RKNN_FLAG_COLLECT_PERF_MASK (0x8)" in run.stderr
    assert "this one was made with flag 0x0" in run.stderr
    assert len(_phase_tables(run.stdout)) == 2 and "Information Table" not in run.stdout
    names = [name for name, _ in _log_calls(log)]
    assert names[-1] == "rknn_destroy" and names.count("rknn_destroy") == 1
    # the unmodified program with --perf asks for it and gets it
    ok = subprocess.run([str(phases), str(fake_model), "--perf", "--frames", "2"], capture_output=True, text=True,
                        timeout=60, env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
    assert ok.returncode == 0 and "Information Table" in ok.stdout and ok.stderr == ""


def test_phases_reports_a_refused_core_mask(phases: Path, fake_model: Path, tmp_path: Path):
    log = tmp_path / "calls.log"
    run = _run_logged(phases, [fake_model, "--core-mask", "5"], log)   # not a mask the runtime knows
    assert run.returncode == 1
    assert "phases: rknn_set_core_mask(ctx, 0x5) failed: -5 (RKNN_ERR_PARAM_INVALID)" in run.stderr
    assert "RK3588 and RK3576" in run.stderr
    names = [name for name, _ in _log_calls(log)]
    assert "rknn_inputs_set" not in names and names[-1] == "rknn_destroy"


def test_phases_refuses_bad_arguments_and_reports_a_bad_model(phases: Path, fake_model: Path, tmp_path: Path):
    for args in ([], ["--perf"], [fake_model, "--frames", "0"], [fake_model, "--frames"],
                 [fake_model, "--frames", "ten"], [fake_model, "--core-mask", "0x10000"],
                 [fake_model, "--core-mask", "seven"], [fake_model, fake_model], [fake_model, "--fast"]):
        run = subprocess.run([str(phases), *map(str, args)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "usage" in run.stderr, args
    bad = tmp_path / "bad.rknn"
    bad.write_bytes(b"not a model")
    log = tmp_path / "calls.log"
    run = _run_logged(phases, [bad, "--perf"], log)
    assert run.returncode == 1
    assert "phases: rknn_init failed: -6 (RKNN_ERR_MODEL_INVALID)" in run.stderr
    assert [name for name, _ in _log_calls(log)] == ["rknn_init"]


def test_phases_readme_commands_run_and_its_output_shape_is_the_program_s(phases: Path, fake_model: Path,
                                                                          tmp_path: Path):
    """Every ./phases command of the README runs (on the double, with the fake model; a pipeline in
    bash), the one that saves the per-layer text saves just that text, and every line of the "What
    it prints" block is the program's, up to the values it leaves out (…) and the numbers of the
    model it names."""
    from rknnlab import profile
    text = (EXAMPLES / "README.md").read_text()
    section = text[text.index("## phases.c"):text.index("## In the test suite")]
    assert "examples/c/phases.c -lrknnrt -o phases" in section
    commands = re.findall(r"^\./phases (\S+)(.*?)(?:  +#.*)?$", section, re.M)
    assert len(commands) == 5
    env = dict(os.environ, RKNN_DOUBLE_NO_LOG="1")
    outputs = []
    for model, args in commands:
        if "|" in args:     # a shell pipeline, run as the README gives it
            run = subprocess.run(["bash", "-c", f"set -o pipefail; {phases} {fake_model}{args}"], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=60, env=env)
            assert run.returncode == 0, (args, run.stderr)
            saved = (tmp_path / re.search(r"> (\S+)$", args.strip()).group(1)).read_text()
            assert saved.startswith("-" * 20) and len(profile.parse_perf_detail(saved)) == 6
            continue
        run = subprocess.run([str(phases), str(fake_model), *args.split()], capture_output=True, text=True,
                             timeout=60, env=env)
        assert run.returncode == 0, (model, args, run.stderr)
        outputs.append(run.stdout.replace(str(fake_model), model))
    shape = re.search(r"What it prints.*?```text\n(.*?)```", section, re.S).group(1)
    printed = outputs[0].splitlines()
    for line in shape.splitlines():
        if not line or line == "(the same six rows)":
            continue
        head = re.sub(r"\d+", r"\\d+", re.escape(line.split("…")[0].rstrip()))
        assert any(re.match(head, out) for out in printed), line


# --------------------------------------------------------------------------- allocation.c (chapter 5)

@pytest.fixture(scope="module")
def allocation(rknn_double_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_example("allocation", rknn_double_path, tmp_path_factory.mktemp("c_examples"))


def _build_variant(double: Path, out_dir: Path, replace: str, by: str) -> Path:
    """A copy of allocation.c with one planted change, built as the original is."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C examples cannot be built")
    source = (EXAMPLES / "allocation.c").read_text()
    assert source.count(replace) == 1, replace
    planted = out_dir / "allocation_planted.c"
    planted.write_text(source.replace(replace, by))
    exe = out_dir / "allocation_planted"
    subprocess.run([gcc, "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "lib" / "rknnlab" / "c"),
                    str(planted), str(double), f"-Wl,-rpath,{double.parent}", "-o", str(exe)], check=True)
    return exe


def _double_scores(frame: int, zp: int = -10, scale: float = 0.5) -> str:
    """The values allocation.c must print for output 0 after it wrote frame's input: its pixels are
    (frame + i) mod 256 at dense index i, given as uint8 (the double quantizes q = u - 128), and the
    double's scores[k] = (sum of q + k) mod 256 as int8.  The first 8 of 10, dequantized, as %g."""
    total = sum(((frame + i) & 0xff) - 128 for i in range(48))
    values = []
    for k in range(8):
        q = (total + k) & 0xff
        q = q - 256 if q > 127 else q
        values.append("%g" % ((q - zp) * scale))
    return " ".join(values)


def _native_sizes(rt, model: Path):
    """size_with_stride of the double's native input, then of each native output."""
    from rknnlab.rknn import abi
    ctx = rt.init(str(model))
    try:
        num = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
        sizes = [rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=i)).size_with_stride
                 for i in range(num.n_input)]
        sizes += [rt.query(ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, abi.rknn_tensor_attr(index=i)).size_with_stride
                  for i in range(num.n_output)]
    finally:
        rt.destroy(ctx)
    return sizes


def _all_mems_destroyed(calls, refused: int = 0) -> None:
    """Every mem the program created was destroyed once, before rknn_destroy of its context
    (``refused``: create calls that returned NULL; the log does not say which)."""
    created = sum(name in ("rknn_create_mem", "rknn_create_mem2", "rknn_create_mem_from_fd")
                  for name, _ in calls) - refused
    destroyed = [fields["mem"] for name, fields in calls if name == "rknn_destroy_mem"]
    assert created == len(destroyed) == len(set(destroyed)) > 0
    gone = set()
    for name, fields in calls:
        if name == "rknn_destroy":
            gone.add(fields["ctx"])
        elif name == "rknn_destroy_mem":
            assert fields["ctx"] not in gone, "a mem destroyed after its context"


def test_allocation_prealloc_binds_each_native_mem_once_and_reads_it(allocation: Path, fake_model: Path,
                                                                     double_runtime, tmp_path: Path):
    """One create_mem per tensor, sized from the native size_with_stride; one set_io_mem each, all
    before the first run; per frame: sync TO_DEVICE, run, sync FROM_DEVICE of each output, and no
    inputs_set or outputs_get at all.  The values printed are the double's for the last frame's
    input: the program wrote the input at the w_stride pitch (the double reads it there) and read
    the bound output mem after the run."""
    sizes = _native_sizes(double_runtime, fake_model)
    assert sizes[0] > 48        # the double pads the input rows: attr.size would be too small
    log = tmp_path / "calls.log"
    run = _run_logged(allocation, ["prealloc", fake_model, "7"], log)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    calls = _log_calls(log)
    names = [name for name, _ in calls]
    assert "rknn_inputs_set" not in names and "rknn_outputs_get" not in names
    assert [int(f["size"]) for n, f in calls if n == "rknn_create_mem"] == sizes
    binds = [f for n, f in calls if n == "rknn_set_io_mem"]
    assert [int(f["mem_size"]) for f in binds] == sizes
    assert [int(f["size_with_stride"]) for f in binds] == sizes
    assert binds[0]["name"] == "input" and binds[0]["type"] == "3"       # the image given as UINT8
    first_run = names.index("rknn_run")
    assert names.count("rknn_set_io_mem") == 3 and max(i for i, n in enumerate(names) if n == "rknn_set_io_mem") < first_run
    frames = []
    for name, fields in calls[first_run - 1:]:
        if name == "rknn_mem_sync":
            frames.append(f"sync{fields['mode']}")
        elif name == "rknn_run":
            frames.append("run")
    assert frames == ["sync1", "run", "sync2", "sync2"] * 7
    _all_mems_destroyed(calls)
    assert names[-1] == "rknn_destroy" and names.count("rknn_destroy") == 1
    assert f"frame 7:\n  output 0 (native NCHW INT8), first 8 of 10 values: {_double_scores(6)}\n" in run.stdout
    assert "output follows input: yes" in run.stdout
    assert f"io mems: 3, {sum(sizes)} B in all, created and bound before the loop" in run.stdout


def test_allocation_prealloc_memory_stays_flat(allocation: Path, fake_model: Path, double_runtime):
    """20,000 frames: nothing grows after frame 1, and the DMA totals are the double's own answer for
    a flag-0 context."""
    from rknnlab.rknn import abi
    ctx = double_runtime.init(str(fake_model))
    try:
        dma = double_runtime.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size
    finally:
        double_runtime.destroy(ctx)
    run = subprocess.run([str(allocation), "prealloc", str(fake_model), "20000"], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
    assert run.returncode == 0, run.stderr
    for when in ("before the loop:", "after frame 1:", "after the last frame:"):
        assert re.search(rf"^{when} +RSS \d+ kB, DMA total {dma} B$", run.stdout, re.M), when
    growth = re.search(r"^growth from frame 1 to frame 20000: RSS (-?\d+) kB, DMA total (-?\d+) B$", run.stdout, re.M)
    assert growth and int(growth.group(2)) == 0
    assert int(growth.group(1)) < 256, run.stdout   # a mem per frame would add megabytes
    assert f"frame 20000:\n  output 0 (native NCHW INT8), first 8 of 10 values: {_double_scores(19999)}" in run.stdout


def test_allocation_prealloc_a_per_frame_bind_is_caught(rknn_double_path: Path, fake_model: Path, tmp_path: Path):
    """A planted copy that creates and binds its mems inside the loop (the recipe's pattern, without
    its frees): the double runs out of mems, and the program says which call failed."""
    exe = _build_variant(rknn_double_path, tmp_path,
                         "ok = write_inputs(&m, frame) && run_and_sync(&m);",
                         "ok = bind_io(&m, &io_bytes) && write_inputs(&m, frame) && run_and_sync(&m);")
    run = subprocess.run([str(exe), "prealloc", str(fake_model), "200"], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
    assert run.returncode == 1
    assert "returned NULL" in run.stderr and "rknn_create_mem(size_with_stride)" in run.stderr


SHARED_MODELS = {"A": b"RKNN model A internal=1024 weights=8192",
                 "B": b"RKNN model B internal=3072",
                 "C": b"RKNN model C internal=2560 weights=1000"}


@pytest.fixture
def shared_models(tmp_path: Path):
    """Three fake models with different weight and internal sizes (the double reads them from the
    payload), so that the largest internal size is not the first model's."""
    paths = []
    for name, payload in SHARED_MODELS.items():
        path = tmp_path / f"model_{name}.rknn"
        path.write_bytes(payload)
        paths.append(path)
    return paths


def _sizes_of(rt, model: Path, flag: int):
    from rknnlab.rknn import abi
    ctx = rt.init(str(model), flag)
    try:
        return rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    finally:
        rt.destroy(ctx)


@pytest.mark.parametrize("n", [2, 3])
def test_allocation_shared_sizes_one_internal_buffer_for_all(allocation: Path, shared_models, double_runtime,
                                                             tmp_path: Path, n: int):
    """MEM_ALLOC_OUTSIDE: one create_mem of the largest internal size; a view of it per context with
    that context's own size (same fd, same address, offset 0); weights of each model's own size;
    everything set before the first run; the models run A, B, (C), twice; teardown destroys the
    shared buffer after every view and before model A's context; the saving printed is the sum of
    the internal sizes minus the largest."""
    from rknnlab.rknn import abi
    models = shared_models[:n]
    sizes = [_sizes_of(double_runtime, m, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE) for m in models]
    internal = [s.total_internal_size for s in sizes]
    weights = [s.total_weight_size for s in sizes]
    io = sum(_native_sizes(double_runtime, models[0])) * n
    assert internal[0] != max(internal)          # the first model is not the largest one
    log = tmp_path / "calls.log"
    run = _run_logged(allocation, ["shared", *models], log)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    for name, model, s in zip("ABC", models, sizes):
        assert (f"model {name} {model}: weights {s.total_weight_size} B, internal {s.total_internal_size} B, "
                f"DMA total after init {s.total_dma_allocated_size} B") in out
    assert f"one internal buffer of {max(internal)} B (the largest total_internal_size)" in out
    parts = " + ".join(map(str, internal))
    assert (f"internal memory: separate buffers {parts} = {sum(internal)} B; one shared buffer {max(internal)} B; "
            f"saved {sum(internal) - max(internal)} B") in out
    assert (f"mems you allocated: internal {max(internal)} B + weights {sum(weights)} B + io {io} B = "
            f"{max(internal) + sum(weights) + io} B") in out
    for i, name in enumerate("ABC"[:n]):
        assert (f"model {name}, round 2:\n  output 0 (native NCHW INT8), first 8 of 10 values: {_double_scores(i)}\n"
                f"  output 0 equal to round 1: yes") in out

    calls = _log_calls(log)
    names = [name for name, _ in calls]
    inits = [f for nm, f in calls if nm == "rknn_init"]
    assert [f["flag"] for f in inits] == ["0x10"] * n
    ctxs = []      # each context as the first query after its init names it
    for i, (name, fields) in enumerate(calls):
        if name == "rknn_init":
            ctxs.append(next(f["ctx"] for nm, f in calls[i:] if nm == "rknn_query"))
    shared = [f for nm, f in calls if nm == "rknn_create_mem" and int(f["size"]) == max(internal)]
    assert len(shared) == 1 and shared[0]["ctx"] == ctxs[0]
    views = [f for nm, f in calls if nm == "rknn_create_mem_from_fd"]
    assert [f["ctx"] for f in views] == ctxs
    assert [int(f["size"]) for f in views] == internal
    assert len({(f["fd"], f["virt"]) for f in views}) == 1 and {f["offset"] for f in views} == {"0"}
    set_internal = [f for nm, f in calls if nm == "rknn_set_internal_mem"]
    assert [(f["ctx"], int(f["size"]), f["fd"]) for f in set_internal] == [(c, s, views[0]["fd"])
                                                                         for c, s in zip(ctxs, internal)]
    set_weight = [f for nm, f in calls if nm == "rknn_set_weight_mem"]
    assert [(f["ctx"], int(f["size"])) for f in set_weight] == list(zip(ctxs, weights))
    first_run = names.index("rknn_run")
    assert all(i < first_run for i, nm in enumerate(names)
               if nm in ("rknn_set_internal_mem", "rknn_set_weight_mem", "rknn_set_io_mem", "rknn_create_mem"))
    assert [f["ctx"] for nm, f in calls if nm == "rknn_run"] == ctxs * 2
    assert "rknn_outputs_get" not in names and "rknn_inputs_set" not in names
    # teardown: B, C before A; the shared buffer after every view, with A's context, before A goes
    _all_mems_destroyed(calls)
    destroyed = [(i, f) for i, (nm, f) in enumerate(calls) if nm == "rknn_destroy_mem"]
    big = [i for i, f in destroyed if f["flags"] == "1" and int(f["size"]) == max(internal) and f["fd"] == views[0]["fd"]]
    view_ends = [i for i, f in destroyed if f["flags"] == "2"]
    assert len(big) == 1 and len(view_ends) == n and max(view_ends) < big[0]
    assert calls[big[0]][1]["ctx"] == ctxs[0]
    assert [f["ctx"] for nm, f in calls if nm == "rknn_destroy"] == ctxs[:0:-1] + ctxs[:1]
    assert names[big[0] + 1:] == ["rknn_destroy"]


def test_allocation_shared_internal_only_leaves_the_weights_inside(allocation: Path, shared_models, double_runtime,
                                                                   tmp_path: Path):
    from rknnlab.rknn import abi
    sizes = [_sizes_of(double_runtime, m, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for m in shared_models]
    log = tmp_path / "calls.log"
    run = _run_logged(allocation, ["shared", "--internal-only", *shared_models], log)
    assert run.returncode == 0, run.stderr
    calls = _log_calls(log)
    assert [f["flag"] for nm, f in calls if nm == "rknn_init"] == ["0x200"] * 3
    assert not [nm for nm, _ in calls if nm == "rknn_set_weight_mem"]
    assert len([nm for nm, _ in calls if nm == "rknn_set_internal_mem"]) == 3
    # the runtime keeps (and counts) the weights: its DMA totals are the double's for this flag
    assert "DMA total the runtime allocated itself, after setup: " + " ".join(
        f"{name} {s.total_dma_allocated_size} B" for name, s in zip("ABC", sizes)) in run.stdout
    assert all(s.total_dma_allocated_size >= s.total_weight_size for s in sizes)
    assert re.search(r"^mems you allocated: internal 3072 B \+ weights 0 B \+ io \d+ B", run.stdout, re.M)
    assert run.stdout.count("output 0 equal to round 1: yes") == 3
    _all_mems_destroyed(calls)


def test_allocation_shared_without_weight_mem_fails_cleanly(allocation: Path, shared_models, tmp_path: Path):
    """--skip-weight-mem does what the documentation's snippets do: with MEM_ALLOC_OUTSIDE the first
    rknn_run is refused (the double: PARAM_INVALID, as the simulator's A15), the program says what
    is missing, and it still frees every mem and context."""
    log = tmp_path / "calls.log"
    run = _run_logged(allocation, ["shared", "--skip-weight-mem", *shared_models[:2]], log)
    assert run.returncode == 1
    assert "allocation: rknn_run(model A, " in run.stderr and "failed: -5 (RKNN_ERR_PARAM_INVALID)" in run.stderr
    assert "rknn_create_mem(total_weight_size) + rknn_set_weight_mem before rknn_run" in run.stderr
    calls = _log_calls(log)
    names = [nm for nm, _ in calls]
    assert "rknn_set_weight_mem" not in names and names.count("rknn_run") == 1
    assert names.count("rknn_destroy") == 2
    _all_mems_destroyed(calls)
    assert "saved" not in run.stdout


def test_allocation_shared_a_buffer_sized_for_the_first_model_is_caught(rknn_double_path: Path, shared_models,
                                                                        tmp_path: Path):
    """A planted copy that sizes the shared buffer from model A alone (not the largest): the view for
    the larger model does not fit in it, and the program reports the call that refused."""
    exe = _build_variant(rknn_double_path, tmp_path,
                         "if (m->sizes.total_internal_size > max_internal) max_internal = m->sizes.total_internal_size;",
                         "if (i == 0) max_internal = m->sizes.total_internal_size;")
    log = tmp_path / "calls.log"
    run = _run_logged(exe, ["shared", *shared_models[:2]], log)      # A (1024 B), then B (3072 B)
    assert run.returncode == 1
    assert "allocation: rknn_create_mem_from_fd(shared buffer) of 3072 B returned NULL" in run.stderr
    _all_mems_destroyed(_log_calls(log), refused=1)


def test_allocation_shared_readme_typo_is_caught(rknn_double_path: Path, shared_models, tmp_path: Path):
    """A planted copy of the typo in the demo's README (every view sized as model A's): model A's
    1024 B view is too small for model B's internal memory, and rknn_set_internal_mem refuses it."""
    exe = _build_variant(rknn_double_path, tmp_path,
                         "shared->virt_addr,\n                                                   m->sizes.total_internal_size,",
                         "shared->virt_addr,\n                                                   models[0].sizes.total_internal_size,")
    run = subprocess.run([str(exe), "shared", str(shared_models[0]), str(shared_models[1])], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, RKNN_DOUBLE_NO_LOG="1"))
    assert run.returncode == 1
    assert "allocation: rknn_set_internal_mem failed: -5 (RKNN_ERR_PARAM_INVALID)" in run.stderr


@pytest.mark.parametrize("mode", ["prealloc", "shared"])
def test_allocation_reports_a_missing_model_and_frees_what_it_got(allocation: Path, shared_models, tmp_path: Path,
                                                                  mode: str):
    missing = tmp_path / "missing.rknn"
    log = tmp_path / "calls.log"
    args = ["prealloc", missing] if mode == "prealloc" else ["shared", shared_models[0], missing]
    run = _run_logged(allocation, args, log)
    assert run.returncode == 1
    assert f"allocation: cannot open model {missing}: No such file or directory" in run.stderr
    names = [nm for nm, _ in _log_calls(log)] if log.exists() else []
    assert names.count("rknn_init") == names.count("rknn_destroy") == (0 if mode == "prealloc" else 1)


def test_allocation_reports_a_bad_model(allocation: Path, tmp_path: Path):
    bad = tmp_path / "bad.rknn"
    bad.write_bytes(b"not a model")
    run = subprocess.run([str(allocation), "prealloc", str(bad)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert f"allocation: rknn_init({bad}, flag 0x0) failed: -6 (RKNN_ERR_MODEL_INVALID)" in run.stderr


def test_allocation_refuses_bad_arguments(allocation: Path, fake_model: Path):
    m = str(fake_model)
    for args in ([], ["prealloc"], ["prealloc", m, "1"], ["prealloc", m, "ten"], ["prealloc", m, "5", "x"],
                 ["shared", m], ["shared", m, m, m, m], ["shared", "--internal-only", "--skip-weight-mem", m, m],
                 ["shared", "--fast", m, m], ["strategy", m]):
        run = subprocess.run([str(allocation), *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "usage" in run.stderr, args


def test_allocation_readme_commands_run_and_its_output_shape_is_the_program_s(allocation: Path, shared_models):
    """Every ./allocation command of the README runs on the double (its models replaced, in order,
    by the fake models A, B, C), and every line of its "What `shared` prints" block is the
    program's, up to the values it leaves out (…)."""
    text = (EXAMPLES / "README.md").read_text()
    section = text[text.index("## allocation.c"):text.index("## In the test suite")]
    assert "examples/c/allocation.c -lrknnrt -o allocation" in section
    commands = re.findall(r"^\./allocation (.*?)(?:  +#.*)?$", section, re.M)
    assert len(commands) == 6
    env = dict(os.environ, RKNN_DOUBLE_NO_LOG="1")
    shown = {}
    for command in commands:
        args, fakes = [], iter(shared_models)
        for arg in command.split():
            if arg.endswith(".rknn"):
                fake = next(fakes)
                shown[str(fake)] = arg
                arg = str(fake)
            args.append(arg)
        run = subprocess.run([str(allocation), *args], capture_output=True, text=True, timeout=60, env=env)
        assert run.returncode == (1 if "--skip-weight-mem" in args else 0), (command, run.stderr)
        if args[0] == "shared" and len(args) == 3:
            printed = run.stdout
            for fake, readme_path in shown.items():
                printed = printed.replace(fake, readme_path)
    shape = re.search(r"What `shared` prints.*?```text\n(.*?)```", section, re.S).group(1)
    lines = printed.splitlines()
    for line in shape.splitlines():
        if not line or line.startswith("("):
            continue
        head = re.sub(r"\d+", r"\\d+", re.escape(line.split("…")[0].rstrip()))
        assert any(re.match(head, out) for out in lines), line


# --------------------------------------------------------------------------- video_pipeline.c (chapter 6)

PPOCR_REPORT = ROOT / "data" / "models" / "ppocr_det" / "rk3588.report.json"


def detector_payload(w_stride: int = 0) -> str:
    """The double's description of the text detector, from the course's compiler report of ppocr_det
    for rk3588: its native attrs (the map is 1x4x480x480x16 there: C1 = 4 for one channel)."""
    import json
    report = json.loads(PPOCR_REPORT.read_text())
    native_in, native_out = report["inputs"][0]["native"], report["outputs"][0]["native"]
    assert native_out["fmt"] == "RKNN_TENSOR_NC1HWC2", native_out      # what the double models
    h, w = native_in["dims"][1], native_in["dims"][2]
    c1, c2 = native_out["dims"][1], native_out["dims"][4]
    return (f"detector={h}x{w} c1={c1} c2={c2} zp={native_out['zp']} scale={native_out['scale']:.9g} "
            f"w_stride={w_stride or native_in['w_stride']}")


@pytest.fixture(scope="module")
def video_pipeline(rknn_double_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_pipeline(EXAMPLES / "video_pipeline.c", rknn_double_path,
                           tmp_path_factory.mktemp("c_examples"))


def _build_pipeline(source: Path, double: Path, out_dir: Path) -> Path:
    """-std=c11 -Wall -Wextra -Werror -pthread, against our header and the double; -O2 as the README
    builds it on a board (at -O2 gcc turns malloc + memset(0) into calloc, which touches no page: the
    RSS test below then sees the buffers come in during the first frame)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C examples cannot be built")
    exe = out_dir / source.stem
    subprocess.run([gcc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread",
                    "-I", str(ROOT / "lib" / "rknnlab" / "c"), str(source), str(double),
                    f"-Wl,-rpath,{double.parent}", "-lm", "-o", str(exe)], check=True)
    return exe


def _planted_pipeline(double: Path, tmp_path: Path, old: str, new: str) -> Path:
    """A copy of video_pipeline.c with one planted mistake (`old` must occur exactly once)."""
    text = (EXAMPLES / "video_pipeline.c").read_text()
    assert text.count(old) == 1, old
    source = tmp_path / "video_pipeline.c"
    source.write_text(text.replace(old, new))
    return _build_pipeline(source, double, tmp_path)


@pytest.fixture
def detector(tmp_path: Path) -> Path:
    model = tmp_path / "detector.rknn"
    model.write_text("RKNN " + detector_payload())
    return model


def _pipeline_run(exe: Path, model: Path, *args, log: Optional[Path] = None,
                  env_extra: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RKNN_DOUBLE_NO_LOG", "RKNN_DOUBLE_LOG_FILE", "RKNN_DOUBLE_DELAY_US")}
    env.update(env_extra or {})
    if log is None:
        env["RKNN_DOUBLE_NO_LOG"] = "1"
    else:
        env["RKNN_DOUBLE_LOG_FILE"] = str(log)
    return subprocess.run([str(exe), str(model), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def _frames(out: str) -> Dict[int, Dict[str, Any]]:
    """The per-frame lines: {frame: {"worker": w, "n": boxes, "boxes": [(x0, y0, x1, y1), ...]}}."""
    frames: Dict[int, Dict[str, Any]] = {}
    current = None
    for line in out.splitlines():
        m = re.fullmatch(r"frame (\d+) worker (\d+): (\d+) boxes", line)
        if m:
            current = frames[int(m.group(1))] = {"worker": int(m.group(2)), "n": int(m.group(3)), "boxes": []}
            continue
        m = re.fullmatch(r"  box (\d+) (\d+) (\d+) (\d+) score ([\d.]+)", line)
        if m and current is not None:
            current["boxes"].append(tuple(int(g) for g in m.groups()[:4]))
    return frames


def _summary(out: str) -> Dict[str, Any]:
    boxes = re.search(r"^boxes: (\d+) in (\d+) frames, checksum ([0-9a-f]{16})$", out, re.M)
    rss = re.search(r"^RSS: (\d+) kB before the loop, (\d+) kB after, growth (-?\d+) kB$", out, re.M)
    per_worker = re.search(r"^frames per worker:((?: \d+)+)$", out, re.M)
    assert boxes and rss and per_worker, out
    return {"boxes": int(boxes.group(1)), "frames": int(boxes.group(2)), "checksum": boxes.group(3),
            "growth_kb": int(rss.group(3)), "per_worker": [int(n) for n in per_worker.group(1).split()]}


def test_video_pipeline_finds_every_bar_of_the_pattern_and_follows_it(video_pipeline: Path, detector: Path):
    """The synthetic pattern has 5 dark bars that slide right by 8 px per frame: 5 wide, flat boxes
    per frame, each one 8 px further right in the next frame (the boxes come from the frames)."""
    run = _pipeline_run(video_pipeline, detector, "--frames", 30)
    assert run.returncode == 0, run.stderr
    frames = _frames(run.stdout)
    assert sorted(frames) == [0, 1, 2]
    for f in frames.values():
        assert f["n"] == 5 and len(f["boxes"]) == 5
        for x0, y0, x1, y1 in f["boxes"]:
            assert x1 - x0 > 4 * (y1 - y0)                       # a text line, not a blob
            assert 0 <= x0 < x1 <= 1280 and 0 <= y0 < y1 <= 720
    rows = [sorted(f["boxes"], key=lambda b: b[1]) for f in (frames[0], frames[1])]
    for before, after in zip(*rows):
        assert after[1] == before[1] and after[3] == before[3]
        assert abs((after[0] - before[0]) - 8) <= 3 and abs((after[2] - before[2]) - 8) <= 3
    summary = _summary(run.stdout)
    assert (summary["boxes"], summary["frames"]) == (150, 30)
    assert "per-frame allocations: none" in run.stdout
    # the int8 threshold: smallest q with (q - zp) x scale >= 0.3, printed with the attr's zp and scale
    m = re.search(r"probability 0\.30 -> int8 q >= (-?\d+) \(zp (-?\d+), scale ([\d.e-]+)\)", run.stdout)
    q, zp, scale = int(m.group(1)), int(m.group(2)), float(m.group(3))
    assert (q - zp) * scale >= 0.3 - 1e-6 > (q - 1 - zp) * scale


def _nv12(rgb_rects, width: int, height: int):
    """One NV12 frame: light paper (Y 200), the given rectangles dark (Y 30); rectangles even-aligned."""
    import numpy as np
    y = np.full((height, width), 200, np.uint8)
    for x0, y0, x1, y1 in rgb_rects:
        y[y0:y1, x0:x1] = 30
    uv = np.full((height // 2, width), 128, np.uint8)
    return y.tobytes() + uv.tobytes()


NV12_RECTS = [
    [(40, 40, 300, 70), (100, 200, 560, 240)],
    [(20, 100, 200, 130), (300, 100, 600, 120), (60, 300, 400, 340)],
    [(0, 0, 640, 20), (100, 60, 140, 200), (200, 250, 420, 280), (480, 300, 620, 330)],
]


@pytest.mark.parametrize("w_stride", [0, 496])
def test_video_pipeline_maps_boxes_back_to_the_frames_it_reads(video_pipeline: Path, tmp_path: Path,
                                                                w_stride: int):
    """Frames from --nv12 with dark rectangles at known places (a tall 640x400 frame: the letterbox
    pads left and right): with --unclip 0 every box is its rectangle, in frame pixels, within the
    letterbox's rounding (1/scale = 1.33 px).  The file holds 3 frames; 6 frames read it twice.
    w_stride 496: the double's native input rows are padded, and the boxes must not change."""
    width, height = 640, 400
    video = tmp_path / "frames.nv12"
    video.write_bytes(b"".join(_nv12(rects, width, height) for rects in NV12_RECTS))
    model = tmp_path / "detector.rknn"
    model.write_text("RKNN " + detector_payload(w_stride))
    run = _pipeline_run(video_pipeline, model, "--nv12", video, "--width", width, "--height", height,
                        "--frames", 6, "--unclip", 0, "--workers", 2)
    assert run.returncode == 0, run.stderr
    assert "3 NV12 frames of 640x400" in run.stdout and "read again from the start" in run.stdout
    frames = _frames(run.stdout)
    for k, rects in enumerate(NV12_RECTS):
        found = sorted(frames[k]["boxes"])
        assert frames[k]["n"] == len(rects) == len(found), run.stdout
        for got, want in zip(found, sorted(rects)):
            assert all(abs(g - w) <= 2 for g, w in zip(got, want)), (k, got, want)
    assert _summary(run.stdout)["boxes"] == 2 * sum(len(r) for r in NV12_RECTS)


def _shapes_boxes(exe: Path, detector: Path, tmp_path: Path):
    """One 480x480 frame (scale 1, no padding) through the program and through the course's Python:
    two bars touching at one corner, a staircase of 3x3 blocks that touch diagonally (each one
    8-connected component), a grey bar of mean probability 0.55 (kept at 0.5, dropped at PP-OCR
    demo's 0.6), a lighter bar of 0.39 (dropped), a 2x2 dot (too small).  The Python reads the map
    the double computes (q = 127 - luma, -128 below luma 16) from the course's own letterbox of the
    same frame.  Returns (the program's boxes, the Python's boxes rounded outwards), sorted."""
    import numpy as np
    from rknnlab.pipeline import Nv12Frame, find_boxes, letterbox
    size = 480
    y = np.full((size, size), 200, np.uint8)                     # paper: p = 0.16, no text
    y[60:90, 60:160] = 30                                        # bar, then a bar from its corner
    y[90:120, 160:260] = 30
    for k in range(10):
        y[200 + 3 * k:203 + 3 * k, 300 + 3 * k:303 + 3 * k] = 30
    y[200:230, 60:200] = 115                                     # luma 115: p = 140/255 = 0.55
    y[300:330, 60:200] = 150                                     # luma 156: p = 99/255 = 0.39
    y[400:402, 400:402] = 30
    data = np.concatenate([y.ravel(), np.full(size * size // 2, 128, np.uint8)])
    video = tmp_path / "shapes.nv12"
    video.write_bytes(data.tobytes())
    run = _pipeline_run(exe, detector, "--nv12", video, "--width", size, "--height", size, "--frames", 1)
    assert run.returncode == 0, run.stderr
    zp, scale = [float(v) for v in re.search(r"zp=(\S+) scale=(\S+)", detector_payload()).groups()]
    rgb = np.empty((size, size, 3), np.uint8)
    box = letterbox(Nv12Frame(data, size, size, size, size), rgb, size, size)
    r, g, b = rgb.astype(np.int32).transpose(2, 0, 1)
    luma = (77 * r + 150 * g + 29 * b) >> 8
    q = np.where(luma < 16, -128, 127 - luma).astype(np.int8)
    python = sorted((int(np.floor(b.x0)), int(np.floor(b.y0)), int(np.ceil(b.x1)), int(np.ceil(b.y1)))
                    for b in find_boxes(q, int(zp), scale, letterbox=box))
    return sorted(_frames(run.stdout)[0]["boxes"]), python


def _same_boxes(got, expected) -> bool:
    return len(got) == len(expected) and all(abs(a - b) <= 1 for g, e in zip(got, expected)
                                             for a, b in zip(g, e))


def test_video_pipeline_finds_the_boxes_the_python_finds(video_pipeline: Path, detector: Path, tmp_path: Path):
    """examples/c/video_pipeline.c and rknnlab.pipeline.find_boxes follow the same steps with the same
    defaults (8-connectivity, thresh 0.3, box_thresh 0.5, unclip 1.6, min side 3): every box of the
    program is a box of the Python's, within a pixel of rounding."""
    got, expected = _shapes_boxes(video_pipeline, detector, tmp_path)
    assert len(expected) == 3, expected                          # the corner pair, the staircase, grey
    assert _same_boxes(got, expected), (got, expected)
    pair = next(b for b in got if b[1] < 100)
    assert pair[0] < 60 and pair[2] > 260                        # both bars in one box


@pytest.mark.parametrize("old, new, what", [
    ("#define BOX_THRESH 0.5f", "#define BOX_THRESH 0.6f", "PP-OCR demo's box threshold"),
    ("if ((dx || dy) && x + dx >= 0", "if ((dx == 0) != (dy == 0) && x + dx >= 0", "4-neighbours"),
])
def test_video_pipeline_planted_post_processing_differences_show(rknn_double_path: Path, detector: Path,
                                                                  tmp_path: Path, old: str, new: str,
                                                                  what: str):
    """The comparison can fail: a copy with another box threshold or 4-connectivity finds other boxes."""
    exe = _planted_pipeline(rknn_double_path, tmp_path, old, new)
    got, expected = _shapes_boxes(exe, detector, tmp_path)
    assert not _same_boxes(got, expected), what


def test_video_pipeline_with_three_workers_finds_the_same_boxes(video_pipeline: Path, detector: Path,
                                                                tmp_path: Path):
    """One context per worker (rknn_init, then rknn_dup_context), cores 0, 1, 2: the same boxes
    and checksum as one worker; every frame run once; no context used by two threads at once."""
    one = _pipeline_run(video_pipeline, detector, "--frames", 60, "--workers", 1)
    log = tmp_path / "calls.log"
    three = _pipeline_run(video_pipeline, detector, "--frames", 60, "--workers", 3, log=log)
    assert one.returncode == 0 and three.returncode == 0, one.stderr + three.stderr
    a, b = _summary(one.stdout), _summary(three.stdout)
    assert a["checksum"] == b["checksum"] and a["boxes"] == b["boxes"] == 300
    assert [f["boxes"] for f in _frames(one.stdout).values()] == [f["boxes"] for f in _frames(three.stdout).values()]
    assert len(b["per_worker"]) == 3 and sum(b["per_worker"]) == 60
    calls = _log_calls(log)
    names = [name for name, _ in calls]
    assert "rknn_run_overlap" not in names
    assert names.count("rknn_init") == 1 and names.count("rknn_dup_context") == 2
    assert "rknn_inputs_set" not in names and "rknn_outputs_get" not in names
    assert [c["mask"] for n, c in calls if n == "rknn_set_core_mask"] == ["0x1", "0x2", "0x4"]
    contexts = list(dict.fromkeys(c["ctx"] for n, c in calls if n == "rknn_set_core_mask"))
    assert len(contexts) == 3
    runs = {ctx: 0 for ctx in contexts}
    for ctx in contexts:
        mine = [(n, c) for n, c in calls if c.get("ctx") == ctx and n != "rknn_query"]
        created = [c for n, c in mine if n == "rknn_create_mem"]
        bound = [c for n, c in mine if n == "rknn_set_io_mem"]
        # one mem per tensor, of the bound attr's size_with_stride, bound once, before any run
        assert len(created) == len(bound) == 2
        assert [int(c["size"]) for c in created] == [int(c["size_with_stride"]) for c in bound]
        assert (bound[0]["type"], bound[0]["fmt"]) == ("3", "1")         # UINT8, NHWC
        assert bound[1]["fmt"] == "2"                                   # NC1HWC2, as queried
        first_run = next(i for i, (n, _) in enumerate(mine) if n == "rknn_run")
        assert max(i for i, (n, _) in enumerate(mine) if n == "rknn_set_io_mem") < first_run
        runs[ctx] = _frames_synced(mine)
        assert runs[ctx] is not None
        # teardown: this context's mems, then the context
        tail = [n for n, _ in mine if n in ("rknn_destroy_mem", "rknn_destroy")]
        assert tail == ["rknn_destroy_mem", "rknn_destroy_mem", "rknn_destroy"]
    assert sorted(runs.values()) == sorted(b["per_worker"])
    destroyed = [c["ctx"] for n, c in calls if n == "rknn_destroy"]
    assert destroyed[-1] == contexts[0]                     # the duplicates go first


def _frames_synced(mine) -> Optional[int]:
    """One context's calls (name, fields) from its first rknn_run on: the warm-up run and its
    output sync, then per frame the input synced to the device, the run, the output synced back.
    The number of frames, or None when the calls are not that."""
    bound = [c for n, c in mine if n == "rknn_set_io_mem"]
    in_mem, out_mem = bound[0]["mem"], bound[1]["mem"]
    first_run = next(i for i, (n, _) in enumerate(mine) if n == "rknn_run")
    steps = [(n, c.get("mem"), c.get("mode")) for n, c in mine[first_run:] if n in ("rknn_run", "rknn_mem_sync")]
    frame = [("rknn_mem_sync", in_mem, "1"), ("rknn_run", None, None), ("rknn_mem_sync", out_mem, "2")]
    body = steps[2:]
    if steps[:2] != [("rknn_run", None, None), ("rknn_mem_sync", out_mem, "2")] or body != frame * (len(body) // 3):
        return None
    return len(body) // 3


def test_video_pipeline_memory_stays_flat_and_a_planted_allocation_shows(video_pipeline: Path,
                                                                         detector: Path, tmp_path: Path,
                                                                         rknn_double_path: Path):
    """1,500 frames: RSS grows by less than 1 MB (code pages and the thread's stack come in once).
    A copy that mallocs a frame-sized letterbox buffer every frame (and never frees it, as a forgotten
    free does) grows by hundreds of MB, and the test sees it."""
    run = _pipeline_run(video_pipeline, detector, "--frames", 1500, "--workers", 2)
    assert run.returncode == 0, run.stderr
    assert _summary(run.stdout)["growth_kb"] < 1024, run.stdout
    leaky = _planted_pipeline(rknn_double_path, tmp_path, "    t[1] = now_ms();\n",
                              "    t[1] = now_ms();\n    memset(malloc(p->frame_bytes), 1, p->frame_bytes);\n")
    run = _pipeline_run(leaky, detector, "--frames", 200)
    assert run.returncode == 0, run.stderr
    assert _summary(run.stdout)["growth_kb"] > 100_000


@pytest.mark.parametrize("old, new, what", [
    ("(size_t)(p->pad_y + y) * p->in_pitch", "(size_t)(p->pad_y + y) * p->in_w", "rows written densely"),
    ("row[(size_t)x * p->out_c2] >= p->q_thresh", "row[(size_t)x] >= p->q_thresh", "C2 ignored"),
])
def test_video_pipeline_planted_layout_mistakes_change_the_boxes(rknn_double_path: Path, tmp_path: Path,
                                                                 old: str, new: str, what: str):
    """The test can fail: a copy that writes the input rows at the width, not at w_stride (on a model
    whose native rows are padded), or reads the NC1HWC2 map without the C2 stride, finds other boxes."""
    exe = _planted_pipeline(rknn_double_path, tmp_path, old, new)
    model = tmp_path / "detector.rknn"
    model.write_text("RKNN " + detector_payload(w_stride=512))
    run = _pipeline_run(exe, model, "--frames", 3)
    assert run.returncode == 0, run.stderr
    assert [f["n"] for f in _frames(run.stdout).values()] != [5, 5, 5], what


def test_video_pipeline_reports_bad_input_clearly(video_pipeline: Path, detector: Path, tmp_path: Path):
    missing = _pipeline_run(video_pipeline, tmp_path / "missing.rknn")
    assert missing.returncode == 1 and "cannot open model" in missing.stderr and "missing.rknn" in missing.stderr
    for workers in ("0", "7", "three"):
        bad = _pipeline_run(video_pipeline, detector, "--workers", workers)
        assert bad.returncode == 2 and f"--workers must be 1 to 6, not '{workers}'" in bad.stderr
        assert "usage" in bad.stderr
    odd = _pipeline_run(video_pipeline, detector, "--width", "641")
    assert odd.returncode == 2 and "--width must be even" in odd.stderr
    not_a_model = tmp_path / "bad.rknn"
    not_a_model.write_bytes(b"not a model")
    bad = _pipeline_run(video_pipeline, not_a_model)
    assert bad.returncode == 1 and "rknn_init" in bad.stderr and "-6 (RKNN_ERR_MODEL_INVALID)" in bad.stderr
    short = tmp_path / "short.nv12"
    short.write_bytes(b"\0" * 1000)
    bad = _pipeline_run(video_pipeline, detector, "--nv12", short)
    assert bad.returncode == 1 and "not a whole number of 1280x720 NV12 frames" in bad.stderr
    classifier = tmp_path / "classifier.rknn"
    classifier.write_bytes(b"RKNN fake model for the C example")   # 1 input, 2 outputs
    bad = _pipeline_run(video_pipeline, classifier)
    assert bad.returncode == 1 and "1 inputs and 2 outputs" in bad.stderr


def test_video_pipeline_stops_cleanly_when_a_run_fails(rknn_double_path: Path, detector: Path, tmp_path: Path):
    """One thread per context at a time.  A copy that gives every worker the first context (no
    rknn_dup_context) runs it from three threads at once; the double refuses an overlapping rknn_run
    (CTX_INVALID).  The program reports the failed call, prints no summary, still tears down, and
    exits 1."""
    exe = _planted_pipeline(rknn_double_path, tmp_path, "ret = rknn_dup_context(&first->ctx, &wk->ctx);",
                            "wk->ctx = first->ctx;\n        ret = 0;")
    log = tmp_path / "calls.log"
    run = _pipeline_run(exe, detector, "--frames", 200, "--workers", 3, log=log,
                        env_extra={"RKNN_DOUBLE_DELAY_US": "rknn_run=3000"})
    assert run.returncode == 1, run.stdout
    assert "rknn_run (frame" in run.stderr and "RKNN_ERR_CTX_INVALID" in run.stderr
    assert "boxes:" not in run.stdout and "no summary" in run.stderr
    names = [n for n, _ in _log_calls(log)]
    assert "rknn_run_overlap" in names
    assert names.count("rknn_destroy") == 3 and names.count("rknn_destroy_mem") == 6


def test_video_pipeline_readme_commands_run_and_its_output_shape_is_the_program_s(video_pipeline: Path,
                                                                                  detector: Path,
                                                                                  tmp_path: Path):
    """Every ./video_pipeline command of the README runs on the double (the model replaced by the
    detector, camera.nv12 by one black 1920x1080 frame), and every line of its "What it prints"
    block is the program's, up to the values it leaves out (…)."""
    text = (EXAMPLES / "README.md").read_text()
    section = text[text.index("## video_pipeline.c"):text.index("## In the test suite")]
    assert "examples/c/video_pipeline.c -lrknnrt -lm -o video_pipeline" in section
    commands = re.findall(r"^\./video_pipeline (.*?)(?:  +#.*)?$", section, re.M)
    assert len(commands) == 3
    camera = tmp_path / "camera.nv12"
    camera.write_bytes(bytes(1920 * 1080 * 3 // 2))
    outputs = []
    for command in commands:
        args = [str(detector) if a.endswith(".rknn") else str(camera) if a == "camera.nv12" else a
                for a in command.split()]
        run = _pipeline_run(video_pipeline, Path(args[0]), *args[1:])
        assert run.returncode == 0, (command, run.stderr)
        outputs.append(run.stdout)
    assert "frames per worker: " in outputs[1] and len(_summary(outputs[1])["per_worker"]) == 3
    shape = re.search(r"What it prints.*?```text\n(.*?)```", section, re.S).group(1)
    printed = outputs[0].splitlines()
    for line in shape.splitlines():
        if not line or line.startswith("("):
            continue
        head = re.sub(r"\d+", r"\\d+", re.escape(line.split("…")[0].rstrip()))
        assert any(re.match(head, out) for out in printed), line


def test_video_pipeline_goes_on_when_a_core_mask_is_refused(video_pipeline: Path, tmp_path: Path):
    """On a SoC with two NPU cores (the double's "npu_cores=2"), worker 2's RKNN_NPU_CORE_2 is
    refused: the program says so, lets the runtime pick, and finds the same boxes."""
    model = tmp_path / "two_cores.rknn"
    model.write_text("RKNN " + detector_payload() + " npu_cores=2")
    run = _pipeline_run(video_pipeline, model, "--frames", 12, "--workers", 3)
    assert run.returncode == 0, run.stderr
    assert "worker 1: context from rknn_dup_context, core mask RKNN_NPU_CORE_1" in run.stdout
    assert ("worker 2: context from rknn_dup_context, rknn_set_core_mask(RKNN_NPU_CORE_2) refused: "
            "-5 (RKNN_ERR_PARAM_INVALID); the runtime picks the core") in run.stdout
    assert _summary(run.stdout)["boxes"] == 60


def test_video_pipeline_a_copy_that_skips_a_sync_is_caught(video_pipeline: Path, rknn_double_path: Path,
                                                           detector: Path, tmp_path: Path):
    """The call-order check of the three-worker test can fail: a copy that reads the output mem
    without rknn_mem_sync(FROM_DEVICE) (the sync Rockchip's zero-copy demos leave out,
    airockchip/rknn_model_zoo#156) finds the same boxes on the double, which has no cache, but its
    calls per frame are no longer sync-in, run, sync-out."""
    exe = _planted_pipeline(rknn_double_path, tmp_path,
                            "    ret = rknn_mem_sync(wk->ctx, wk->out_mem, RKNN_MEMORY_SYNC_FROM_DEVICE);\n"
                            "    if (ret < 0) return fail(\"rknn_mem_sync(output, RKNN_MEMORY_SYNC_FROM_DEVICE)\", ret);\n"
                            "    t[5] = now_ms();", "    t[5] = now_ms();")
    log = tmp_path / "calls.log"
    run = _pipeline_run(exe, detector, "--frames", 6, log=log)
    assert run.returncode == 0 and _summary(run.stdout)["boxes"] == 30, run.stderr
    assert _frames_synced(_log_calls(log)) is None
    good_log = tmp_path / "good.log"
    run = _pipeline_run(video_pipeline, detector, "--frames", 6, log=good_log)
    assert run.returncode == 0 and _frames_synced(_log_calls(good_log)) == 6
