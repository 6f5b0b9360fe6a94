#!/usr/bin/env python3
"""Rockchip's own C examples as a check of the simulator's librknnrt.so for PCs.

Given checkouts of rknn-toolkit2 and rknn_model_zoo (made by the user; nothing of
them is in this repository), build the examples that need only the runtime's C
API (plus their own helpers, stb, and OpenCV when ``libopencv-dev`` is
installed) against the simulator's library (``rknnlab.cc.simulator_library()``),
run them on the course models in data/models and print a table::

    .venv/bin/python tools/rockchip_c_examples.py \\
        --toolkit2 ~/src/rknn-toolkit2 --model-zoo ~/src/rknn_model_zoo [--out report.md]

This file holds only file paths, compiler flags, command lines and the values
to check (numbers): no code of theirs.  Their CMake files were read to learn
which sources and defines an example needs.

Rows:
- ``skipped``: the example's directory is missing, it needs a library that
  exists only for the board (librga, rk_mpi_mmz, MPP, OpenCL), its only model
  is not a course model, or OpenCV is not installed.
- a build error names the compiler's first error line; a link error on a
  ``rknn_*`` symbol means the library does not export that API.
- ran: the exit code, the simulator's first ``E RKNN:`` line if any, and a key
  line of the output.  Where the expected answer is known the output is
  checked: MobileNetV2's top-1 class for the same pixels (the course's Python
  path, ``rknnlab.open_runtime("sim")``, run in this process) and PP-OCR det's
  boxes (the model zoo README's expected boxes for its test image).

Examples that call librga only on a path they are not run on (rknn_yolov5_demo
with ``letterbox``) are linked with the RGA functions bound to a stub that
aborts, so a call would show, not pass silently.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "data" / "models"

# ----------------------------------------------------------------------------- what to build

#: include directories, relative to each checkout (the runtime's header first)
TK2_INCLUDES = ("rknpu2/runtime/Linux/librknn_api/include", "rknpu2/examples/3rdparty")
ZOO_INCLUDES = ("3rdparty/rknpu2/include", "utils", "3rdparty/stb_image", "3rdparty/librga/include",
                "3rdparty/timer")
#: the model zoo's utils, built without librga and libjpeg (their CMake options)
ZOO_DEFINES = ("DISABLE_RGA", "DISABLE_LIBJPEG")
ZOO_UTILS = ("utils/file_utils.c", "utils/image_utils.c", "utils/image_drawing.c")
OPENCV_LIBS = ("opencv_imgcodecs", "opencv_imgproc", "opencv_core")


@dataclass
class Run:
    """One run of a built example: ``args`` with placeholders ({model}: the course
    model file for ``model``; {model:NAME}: another course model; {png}: a 224x224
    PNG made from the example's dog picture; {nhwc}: the same pixels raw;
    @PATH: a file of the example's directory)."""
    model: str
    args: Tuple[str, ...]
    copy: Tuple[Tuple[str, str], ...] = ()   # (file of the example dir, where in the run dir)
    key: str = r".+"                         # regex: the line shown in the table
    check: str = ""                          # "top1:<regex with the class id as group 1>", "ppocr"


@dataclass
class Example:
    name: str
    repo: str                                # "toolkit2" or "zoo"
    directory: str                           # relative to the checkout
    sources: Tuple[str, ...] = ()            # relative to directory
    repo_sources: Tuple[str, ...] = ()       # relative to the checkout
    includes: Tuple[str, ...] = ()           # extra, relative to directory
    opencv: bool = False
    rga_stub: bool = False
    runs: Tuple[Run, ...] = ()
    skip: str = ""                           # why it is not built at all

    def title(self) -> str:
        return f"{self.repo}:{self.name}"


_RN = "rknpu2/examples"
_ZE = "examples"
_TOP5 = r"^\s*[0-9.]+ - \d+\s*$"

EXAMPLES: Tuple[Example, ...] = (
    Example("rknn_create_mem_demo", "toolkit2", f"{_RN}/rknn_api_demo", ("src/rknn_create_mem_demo.cpp",),
            runs=(Run("mobilenet_v2", ("{model}", "{png}", "3"), key=_TOP5,
                      check=r"top1:^\s*[0-9.]+ - (\d+)\s*$"),)),
    Example("rknn_create_mem_with_rga_demo", "toolkit2", f"{_RN}/rknn_api_demo",
            skip="calls librga (imcopy/imcvtcolor) on its only path; librga is built for the board only"),
    Example("rknn_with_mmz_demo", "toolkit2", f"{_RN}/rknn_api_demo",
            skip="needs rk_mpi_mmz (libmpimmz.so, board/Android only)"),
    Example("rknn_set_internal_mem_from_fd_demo", "toolkit2", f"{_RN}/rknn_api_demo",
            skip="needs rk_mpi_mmz (libmpimmz.so, board/Android only)"),
    Example("rknn_benchmark", "toolkit2", f"{_RN}/rknn_benchmark", ("src/rknn_benchmark.cpp", "src/cnpy/cnpy.cpp"),
            includes=("src",),
            runs=(Run("mobilenet_v2", ("{model}", "{png}", "3"), key=r"Avg Time",
                      check=r"top1:^\s*[0-9.]+ - (\d+)\s*$"),
                  Run("yolov5s", ("{model}", "", "3"), key=r"Avg Time"),
                  Run("ppocr_det", ("{model}", "", "3"), key=r"Avg Time"))),
    Example("rknn_internal_mem_reuse_demo", "toolkit2", f"{_RN}/rknn_internal_mem_reuse_demo",
            ("src/rknn_internal_mem_reuse_demo.cc",),
            runs=(Run("mobilenet_v2", ("{model}", "{png}", "{model:resnet50}", "{png}", "2"),
                      key=r"Max internal size|" + _TOP5, check=r"top1:^\s*[0-9.]+ - (\d+)\s*$"),)),
    Example("rknn_multiple_input_demo", "toolkit2", f"{_RN}/rknn_multiple_input_demo", ("src/main.cc",),
            runs=(Run("mobilenet_v2", ("{model}", "{nhwc}"), key=_TOP5,
                      check=r"top1:^\s*[0-9.]+ - (\d+)\s*$"),)),
    Example("rknn_mobilenet_demo", "toolkit2", f"{_RN}/rknn_mobilenet_demo", ("src/main.cc",), opencv=True,
            runs=(Run("mobilenet_v2", ("{model}", "{png}"), key=r"^\d+: [0-9.]+$",
                      check=r"top1:^(\d+): [0-9.]+$"),)),
    Example("rknn_common_test", "toolkit2", f"{_RN}/rknn_common_test", ("src/main.cc",), opencv=True,
            runs=(Run("mobilenet_v2", ("{model}", "{png}", "2"), key=_TOP5,
                      check=r"top1:^\s*[0-9.]+ - (\d+)\s*$"),)),
    Example("rknn_dynshape_inference", "toolkit2", f"{_RN}/rknn_dynamic_shape_input_demo",
            ("src/rknn_dynshape_inference.cc",), repo_sources=(f"{_RN}/3rdparty/cnpy/cnpy.cpp",), opencv=True,
            runs=(Run("mobilenet_v2_dynamic", ("{model}", "{png}", "1"), key=r"Avg FPS"),)),
    Example("rknn_dynshape_inference_zero_copy", "toolkit2", f"{_RN}/rknn_dynamic_shape_input_demo",
            ("src/rknn_dynshape_inference_zero_copy.cc",), repo_sources=(f"{_RN}/3rdparty/cnpy/cnpy.cpp",),
            opencv=True, runs=(Run("mobilenet_v2_dynamic", ("{model}", "{png}", "1"), key=r"Avg FPS"),)),
    Example("rknn_dynshape_inference_zero_copy_alloc_outside", "toolkit2", f"{_RN}/rknn_dynamic_shape_input_demo",
            skip="needs rk_mpi_mmz (libmpimmz.so, board/Android only)"),
    Example("rknn_yolov5_demo", "toolkit2", f"{_RN}/rknn_yolov5_demo",
            ("src/main.cc", "src/preprocess.cc", "src/postprocess.cc"),
            includes=("include", "../3rdparty/rga/include"), opencv=True, rga_stub=True,
            runs=tuple(Run(m, ("{model}", "@model/bus.jpg", "letterbox", "out.jpg"),
                           copy=(("model/coco_80_labels_list.txt", "model/coco_80_labels_list.txt"),),
                           key=r" @ \(") for m in ("yolov5s", "yolov5n"))),
    Example("rknn_yolov5_video_demo", "toolkit2", f"{_RN}/rknn_yolov5_demo",
            skip="needs MPP, librga and ZLMediaKit (board only)"),
    Example("rknn_matmul_api_demo", "toolkit2", f"{_RN}/rknn_matmul_api_demo",
            ("src/rknn_matmul_api_demo.cpp", "src/matmul_utils.cpp"),
            runs=(Run("", ()),)),
    Example("rknn_custom_cpu_op_demo", "toolkit2", f"{_RN}/rknn_custom_op_demo/rknn_custom_cpu_op_demo",
            ("src/rknn_api_test_custom_cpu_op.cpp",), runs=(Run("", ()),)),
    Example("rknn_custom_gpu_op_demo", "toolkit2", f"{_RN}/rknn_custom_op_demo/rknn_custom_gpu_op_demo",
            skip="needs OpenCL on the board's Mali GPU"),
    # ---- rknn_model_zoo: main.cc + rknpu2/<model>.cc (+ postprocess) + utils
    Example("mobilenet", "zoo", f"{_ZE}/mobilenet/cpp", ("main.cc", "rknpu2/mobilenet.cc"),
            repo_sources=ZOO_UTILS,
            runs=(Run("mobilenet_v2", ("{model}", "{png}"), copy=(("../model/synset.txt", "model/synset.txt"),),
                      key=r"score=", check=r"top1:^\[(\d+)\] score="),)),
    Example("resnet", "zoo", f"{_ZE}/resnet/cpp", ("main.cc", "rknpu2/resnet.cc"), repo_sources=ZOO_UTILS,
            runs=(Run("resnet50", ("{model}", "@../model/dog_224x224.jpg"),
                      copy=(("../model/synset.txt", "model/synset.txt"),), key=r"score="),)),
    Example("yolov5", "zoo", f"{_ZE}/yolov5/cpp", ("main.cc", "rknpu2/yolov5.cc", "postprocess.cc"),
            repo_sources=ZOO_UTILS,
            runs=tuple(Run(m, ("{model}", "@../model/bus.jpg"),
                           copy=(("../model/coco_80_labels_list.txt", "model/coco_80_labels_list.txt"),),
                           key=r" @ \(") for m in ("yolov5s", "yolov5n"))),
    Example("PPOCR-Det", "zoo", f"{_ZE}/PPOCR/PPOCR-Det/cpp",
            ("main.cc", "rknpu2/ppocr_det.cc", "postprocess.cc", "clipper.cc"), repo_sources=ZOO_UTILS,
            opencv=True,
            runs=(Run("ppocr_det", ("{model}", "@../model/test.jpg"), key=r"^\[0\]: ", check="ppocr"),)),
    Example("yolov8", "zoo", f"{_ZE}/yolov8/cpp", skip="no course .rknn for yolov8n (data/models has its reports only)"),
    Example("yolov6", "zoo", f"{_ZE}/yolov6/cpp", skip="no course .rknn for yolov6n (data/models has its reports only)"),
    Example("yolox", "zoo", f"{_ZE}/yolox/cpp", skip="no course .rknn for yolox_s (data/models has its reports only)"),
    Example("RetinaFace", "zoo", f"{_ZE}/RetinaFace/cpp",
            skip="no course .rknn for retinaface_mobile320 (data/models has its reports only)"),
    Example("deeplabv3", "zoo", f"{_ZE}/deeplabv3/cpp",
            skip="no course .rknn for deeplabv3plus_mobilenet_v2 (and its GPU post-process needs OpenCL)"),
)

#: PP-OCR det on the model zoo's test.jpg: the first boxes its README gives as the
#: expected output (pixels), matched within PPOCR_TOLERANCE
PPOCR_BOXES = {
    0: ((27, 459), (136, 459), (136, 478), (27, 478)),
    3: ((367, 368), (474, 366), (476, 386), (368, 388)),
    4: ((27, 363), (282, 365), (281, 384), (26, 382)),
    5: ((25, 334), (342, 334), (342, 352), (25, 352)),
}
PPOCR_TOLERANCE = 3

# ----------------------------------------------------------------------------- results


@dataclass
class Row:
    example: str
    model: str = ""
    built: str = "-"        # yes / no / -
    ran: str = "-"
    exit_code: str = "-"
    key: str = ""
    verdict: str = ""
    status: str = ""        # ok / checked / fail / gap / not-exported / skipped / build-error / assumption
    e_line: str = ""
    seconds: float = 0.0

    def cells(self) -> List[str]:
        return [self.example + (f" ({self.model})" if self.model else ""), self.built, self.ran,
                self.exit_code, self.key, self.verdict]


def _short(text: str, width: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


# ----------------------------------------------------------------------------- building


class Builder:
    def __init__(self, toolkit2: Optional[Path], zoo: Optional[Path], work: Path, library: Path) -> None:
        self.roots = {"toolkit2": toolkit2, "zoo": zoo}
        self.work = work
        self.library = library
        self.opencv = Path("/usr/include/opencv4/opencv2/core.hpp").exists()

    def flags(self, ex: Example) -> List[str]:
        root = self.roots[ex.repo]
        assert root is not None
        base = root / ex.directory
        incs = [str(root / i) for i in (TK2_INCLUDES if ex.repo == "toolkit2" else ZOO_INCLUDES)]
        incs = [str((base / i).resolve()) for i in ex.includes] + [str(base)] + incs
        flags = ["-O1", "-w", "-pthread"] + [f"-I{i}" for i in incs]
        if ex.repo == "zoo":
            flags += [f"-D{d}" for d in ZOO_DEFINES]
        if ex.opencv:
            flags.append("-I/usr/include/opencv4")
        return flags

    def compile(self, ex: Example, out_dir: Path) -> Tuple[Optional[Path], str]:
        """(the program, "") or (None, the compiler's first error line)."""
        root = self.roots[ex.repo]
        assert root is not None
        base = root / ex.directory
        sources = [base / s for s in ex.sources] + [root / s for s in ex.repo_sources]
        for s in sources:
            if not s.exists():
                return None, f"source missing: {s.relative_to(root)}"
        out_dir.mkdir(parents=True, exist_ok=True)
        flags = self.flags(ex)
        objects = []
        for i, src in enumerate(sources):
            obj = out_dir / f"{i:02d}_{src.stem}.o"
            compiler = "gcc" if src.suffix == ".c" else "g++"
            err = _run_compiler([compiler, "-c", *flags, str(src), "-o", str(obj)])
            if err:
                return None, err
            objects.append(obj)
        link = ["g++", "-pthread", *map(str, objects)]
        if ex.rga_stub:
            stub, symbols = self._rga_stub(objects, out_dir)
            if symbols:
                link.append(str(stub))
                link += [f"-Wl,--defsym,{s}=rknnlab_no_rga" for s in symbols]
        link += ["-o", str(out_dir / ex.name), f"-L{self.library.parent}", "-lrknnrt",
                 f"-Wl,-rpath,{self.library.parent}"]
        if ex.opencv:
            link += [f"-l{lib}" for lib in OPENCV_LIBS]
        link += ["-ldl", "-lm"]
        err = _run_compiler(link)
        return (None, err) if err else (out_dir / ex.name, "")

    def _rga_stub(self, objects: Sequence[Path], out_dir: Path) -> Tuple[Path, List[str]]:
        """An object defining rknnlab_no_rga (prints and aborts) and the RGA symbols the
        objects leave undefined (bound to it with --defsym)."""
        names = subprocess.run(["nm", "-u", *map(str, objects)], capture_output=True, text=True).stdout.split()
        names = sorted({n for n in names if n not in ("U",) and not n.endswith(":")})
        demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                                   text=True).stdout.splitlines() if shutil.which("c++filt") else names
        rga = [n for n, d in zip(names, demangled) if re.match(r"(im[A-Za-z_]*|wrapbuffer_\w+)(\(|$)", d)]
        stub_c = out_dir / "no_rga.c"
        stub_c.write_text('#include <stdio.h>\n#include <stdlib.h>\n'
                          'void rknnlab_no_rga(void)\n{\n'
                          '    fputs("rockchip_c_examples: librga is not available on a PC\\n", stderr);\n'
                          '    abort();\n}\n')
        stub_o = out_dir / "no_rga.o"
        subprocess.run(["gcc", "-c", str(stub_c), "-o", str(stub_o)], check=True)
        return stub_o, rga


def _run_compiler(command: List[str]) -> str:
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode == 0:
        return ""
    lines = proc.stderr.splitlines()
    for pattern in (r"undefined reference to", r"\berror\b"):
        for line in lines:
            if re.search(pattern, line):
                return line.strip()
    return (lines[0] if lines else f"exit {proc.returncode}").strip()


# ----------------------------------------------------------------------------- inputs and checks


def make_inputs(toolkit2: Optional[Path], work: Path) -> Dict[str, Path]:
    """{png}, {nhwc}: the toolkit's dog picture as a lossless 224x224 PNG (so stb, OpenCV
    and PIL decode the same pixels) and raw NHWC uint8."""
    import numpy as np
    from PIL import Image
    source = None
    if toolkit2 is not None:
        for rel in ("rknpu2/examples/rknn_mobilenet_demo/model/dog_224x224.jpg",
                    "rknpu2/examples/rknn_api_demo/model/dog_224x224.jpg"):
            if (toolkit2 / rel).exists():
                source = toolkit2 / rel
                break
    if source is not None:
        image = Image.open(source).convert("RGB").resize((224, 224))
    else:  # a smooth synthetic picture
        y, x = np.mgrid[0:224, 0:224]
        image = Image.fromarray(np.stack([x, y, (x + y) // 2], -1).astype(np.uint8))
    png = work / "input_224x224.png"
    image.save(png)
    nhwc = work / "input_224x224_nhwc.bin"
    np.asarray(image, dtype=np.uint8).tofile(nhwc)
    return {"png": png, "nhwc": nhwc}


def python_top1(model: Path, png: Path) -> int:
    """MobileNetV2's top-1 class on the simulator through the course's Python path."""
    import ctypes
    import numpy as np
    from PIL import Image
    import rknnlab
    from rknnlab.rknn import abi
    rt = rknnlab.open_runtime("sim", soc="rk3588")
    try:
        ctx = rt.init(str(model))
        pixels = np.ascontiguousarray(np.asarray(Image.open(png).convert("RGB"), dtype=np.uint8))
        tensor = abi.rknn_input()
        tensor.index, tensor.type, tensor.fmt = 0, abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_NHWC
        tensor.buf, tensor.size = pixels.ctypes.data, pixels.nbytes
        rt.inputs_set(ctx, [tensor])
        rt.run(ctx)
        out = abi.rknn_output()
        out.want_float = 1
        rt.outputs_get(ctx, [out])
        values = np.ctypeslib.as_array(ctypes.cast(out.buf, ctypes.POINTER(ctypes.c_float)), (out.size // 4,))
        top1 = int(np.argmax(values))
        rt.outputs_release(ctx, [out])
        rt.destroy(ctx)
        return top1
    finally:
        rt.close()


def check_ppocr(stdout: str) -> Tuple[bool, str]:
    boxes = {}
    for m in re.finditer(r"^\[(\d+)\]: \[((?:\(\d+, \d+\),? ?){4})\]", stdout, re.M):
        boxes[int(m.group(1))] = tuple((int(a), int(b)) for a, b in re.findall(r"\((\d+), (\d+)\)", m.group(2)))
    bad = []
    for index, want in PPOCR_BOXES.items():
        got = boxes.get(index)
        if got is None or any(abs(g - w) > PPOCR_TOLERANCE for gp, wp in zip(got, want) for g, w in zip(gp, wp)):
            bad.append(f"box {index}: {got} vs {want}")
    if bad:
        return False, "PP-OCR boxes differ from the zoo README's: " + "; ".join(bad)
    return True, f"{len(boxes)} boxes; boxes {sorted(PPOCR_BOXES)} match the zoo README's within {PPOCR_TOLERANCE} px"


# ----------------------------------------------------------------------------- running


def _expand(arg: str, run: Run, base: Path, inputs: Dict[str, Path], soc: str) -> str:
    if arg.startswith("@"):
        return str((base / arg[1:]).resolve())
    arg = arg.replace("{model}", str(MODELS / run.model / f"{soc}.rknn"))
    arg = re.sub(r"\{model:(\w+)\}", lambda m: str(MODELS / m.group(1) / f"{soc}.rknn"), arg)
    for name, path in inputs.items():
        arg = arg.replace("{" + name + "}", str(path))
    return arg


def run_example(ex: Example, run: Run, program: Path, base: Path, run_dir: Path, inputs: Dict[str, Path],
                soc: str, timeout: float, reference: Dict[str, int]) -> Row:
    row = Row(ex.title(), run.model, built="yes")
    missing = [m for m in [run.model] + re.findall(r"\{model:(\w+)\}", " ".join(run.args))
               if not (MODELS / m / f"{soc}.rknn").exists()]
    if missing:
        row.verdict, row.status = f"skipped: no course model {missing[0]}/{soc}.rknn", "skipped"
        return row
    run_dir.mkdir(parents=True, exist_ok=True)
    for src, dst in run.copy:
        target = run_dir / dst
        target.parent.mkdir(parents=True, exist_ok=True)
        if (base / src).exists():
            shutil.copyfile(base / src, target)
    args = [_expand(a, run, base, inputs, soc) for a in run.args]
    env = dict(os.environ, RKNNLAB_SIM_SOC=soc)
    started = time.monotonic()
    try:
        proc = subprocess.run([str(program), *args], cwd=run_dir, capture_output=True, text=True,
                              errors="replace", timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        row.ran, row.verdict, row.status = "timeout", f"FAIL: no exit within {timeout:.0f} s", "fail"
        return row
    row.seconds = time.monotonic() - started
    row.ran = "yes"
    row.exit_code = str(proc.returncode)
    out = _clean(proc.stdout)
    err = _clean(proc.stderr)
    e_lines = [line for line in err.splitlines() if line.startswith("E RKNN")]
    row.e_line = e_lines[0] if e_lines else ""
    keys = [line for line in out.splitlines() if re.search(run.key, line)]
    failing = [line for line in out.splitlines() if re.search(r"fail|error", line, re.I)]
    row.key = _short(keys[0] if keys else (failing[0] if failing else (out.splitlines() or [""])[-1]), 70)
    if row.e_line:
        if "only knows the course models" in row.e_line:
            row.status = "assumption"
            row.verdict = "assumption (course models only): " + _short(row.e_line, 150)
        else:
            row.status = "gap"
            row.verdict = "FAIL, simulator refused: " + _short(row.e_line, 150)
        return row
    if proc.returncode != 0 or not keys:
        tail = (err.strip().splitlines() or out.strip().splitlines() or [""])[-1]
        row.status = "fail"
        row.verdict = f"FAIL (exit {proc.returncode}" + ("" if keys else ", no key line") + f"): {_short(tail, 120)}"
        return row
    row.status, row.verdict = "ok", "ok"
    if run.check.startswith("top1:"):
        m = re.search(run.check[5:], out, re.M)
        want = reference.get(run.model)
        if m is None:
            row.status, row.verdict = "fail", "WRONG: no class id in the output"
        elif want is None:
            row.verdict = f"ok (top-1 {m.group(1)}; no Python reference)"
        elif int(m.group(1)) == want:
            row.status, row.verdict = "checked", f"ok, checked: top-1 {want} as the Python sim path"
        else:
            row.status, row.verdict = "wrong", f"WRONG: top-1 {m.group(1)}, the Python sim path gives {want}"
    elif run.check == "ppocr":
        good, text = check_ppocr(out)
        row.status, row.verdict = ("checked", "ok, checked: " + text) if good else ("wrong", "WRONG: " + text)
    return row


def _clean(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# ----------------------------------------------------------------------------- main


def library_path() -> Path:
    sys.path.insert(0, str(ROOT / "lib"))
    from rknnlab import cc
    return Path(cc.simulator_library())


def collect(toolkit2: Optional[Path], zoo: Optional[Path], work: Path, soc: str = "rk3588",
            only: Sequence[str] = (), timeout: float = 120.0, jobs: int = 4,
            progress=None) -> List[Row]:
    library = library_path()
    builder = Builder(toolkit2, zoo, work, library)
    examples = [e for e in EXAMPLES if not only or e.name in only or e.title() in only]
    rows: Dict[int, List[Row]] = {}
    to_build = []
    for i, ex in enumerate(examples):
        root = builder.roots[ex.repo]
        if root is None:
            rows[i] = [Row(ex.title(), verdict=f"skipped: no --{'model-zoo' if ex.repo == 'zoo' else 'toolkit2'}",
                           status="skipped")]
        elif not (root / ex.directory).is_dir():
            rows[i] = [Row(ex.title(), verdict=f"skipped: {ex.directory} not in the checkout", status="skipped")]
        elif ex.skip:
            rows[i] = [Row(ex.title(), verdict="skipped: " + ex.skip, status="skipped")]
        elif ex.opencv and not builder.opencv:
            rows[i] = [Row(ex.title(), verdict="skipped: needs OpenCV (apt-get install libopencv-dev)",
                           status="skipped")]
        else:
            to_build.append((i, ex))
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        built = {i: pool.submit(builder.compile, ex, work / "build" / f"{ex.repo}_{ex.name}") for i, ex in to_build}
        built_results = {i: f.result() for i, f in built.items()}
    inputs = make_inputs(toolkit2, work)
    reference: Dict[str, int] = {}
    if (MODELS / "mobilenet_v2" / f"{soc}.rknn").exists():
        try:
            reference["mobilenet_v2"] = python_top1(MODELS / "mobilenet_v2" / f"{soc}.rknn", inputs["png"])
        except Exception as exc:  # the check is then not made; the table says so
            print(f"rockchip_c_examples: no Python reference: {exc}", file=sys.stderr)
    for i, ex in to_build:
        program, error = built_results[i]
        if program is None:
            undefined = re.search(r"undefined reference to `(rknn_\w+)", error)
            if undefined:
                rows[i] = [Row(ex.title(), built="no", key=_short(error, 70), status="not-exported",
                               verdict=f"link error: the library does not export {undefined.group(1)}")]
            else:
                rows[i] = [Row(ex.title(), built="no", key=_short(error, 70), status="build-error",
                               verdict="build error: " + _short(error, 150))]
            continue
        rows[i] = []
        base = builder.roots[ex.repo] / ex.directory  # type: ignore[operator]
        for n, run in enumerate(ex.runs):
            if progress:
                progress(f"running {ex.title()} on {run.model or '-'}")
            rows[i].append(run_example(ex, run, program, base, work / "run" / f"{ex.repo}_{ex.name}_{n}",
                                       inputs, soc, timeout, reference))
    return [row for i in sorted(rows) for row in rows[i]]


HEADERS = ["example", "built", "ran", "exit", "key line", "verdict"]


def markdown(rows: Sequence[Row], library: Optional[Path] = None) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|") or " "
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cell(c) for c in row.cells()) + " |" for row in rows]
    counts: Dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    head = f"Library: {library}\n\n" if library else ""
    return head + "\n".join(lines) + f"\n\nRows by status: {summary}\n"


def text_table(rows: Sequence[Row]) -> str:
    cells = [HEADERS] + [[_short(c, 60) for c in row.cells()[:-1]] + [row.verdict] for row in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(HEADERS) - 1)]
    out = []
    for r in cells:
        out.append("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1])
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build Rockchip's C examples (runtime API only) against the simulator's librknnrt.so, "
                    "run them on the course models and print a table.")
    parser.add_argument("--toolkit2", type=Path, help="a checkout of airockchip/rknn-toolkit2")
    parser.add_argument("--model-zoo", type=Path, help="a checkout of airockchip/rknn_model_zoo")
    parser.add_argument("--out", type=Path, help="also write the table as Markdown to this file")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    parser.add_argument("--soc", default="rk3588", help="the course models' SoC to run (default rk3588)")
    parser.add_argument("--only", nargs="*", default=(), help="only these examples (names from the table)")
    parser.add_argument("--work", type=Path, help="build and run here (default: a temporary directory)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run (default 120)")
    parser.add_argument("--jobs", type=int, default=4, help="compilers at once (default 4)")
    args = parser.parse_args(argv)
    if args.toolkit2 is None and args.model_zoo is None:
        parser.error("give --toolkit2 DIR and/or --model-zoo DIR (checkouts of Rockchip's repositories)")
    for name in ("toolkit2", "model_zoo"):
        path = getattr(args, name)
        if path is not None and not path.is_dir():
            parser.error(f"--{name.replace('_', '-')} {path}: not a directory")
    tmp = None
    work = args.work
    if work is None:
        tmp = tempfile.TemporaryDirectory(prefix="rockchip_c_examples.")
        work = Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        rows = collect(args.toolkit2.resolve() if args.toolkit2 else None,
                       args.model_zoo.resolve() if args.model_zoo else None, work.resolve(), args.soc,
                       args.only, args.timeout, args.jobs,
                       progress=lambda s: print(s, file=sys.stderr, flush=True))
    finally:
        if tmp is not None:
            tmp.cleanup()
    print(text_table(rows))
    print(f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s")
    if args.out:
        args.out.write_text(markdown(rows, library_path()))
    if args.json:
        args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
