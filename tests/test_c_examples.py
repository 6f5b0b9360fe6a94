"""The course's C examples compile against our own declarations of the C API
(tests/c_api/rknn_api.h) and run against the C test double of librknnrt.so."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

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
