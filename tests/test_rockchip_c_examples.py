"""tools/rockchip_c_examples.py: Rockchip's own C examples built against the
simulator's librknnrt.so and run on the course models.

The run needs checkouts of rknn-toolkit2 and rknn_model_zoo (CI has none): set
RKNN_TOOLKIT2_DIR and RKNN_MODEL_ZOO_DIR to run it.  The other tests always run.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "rockchip_c_examples.py"

#: functions of Rockchip's examples and utils: the tool may name none of them as a definition
THEIR_FUNCTIONS = (
    "read_image", "write_image", "convert_image", "convert_image_with_letterbox", "read_data_from_file",
    "write_data_to_file", "draw_rectangle", "draw_text", "rknn_GetTopN", "dump_tensor_attr",
    "get_type_string", "get_format_string", "get_qnt_type_string", "load_model", "load_image", "load_npy",
    "save_npy", "letterbox", "resize_rga", "post_process", "init_post_process", "deinit_post_process",
    "qnt_f32_to_affine", "deqnt_affine_to_f32", "init_mobilenet_model", "inference_mobilenet_model",
    "init_yolov5_model", "inference_yolov5_model", "inference_ppocr_det_model", "getCurrentTimeUs",
    "nms", "quick_sort_indice_inverse", "CalculateOverlap", "loadLabelName", "split",
)

#: (example title, model) -> the statuses it must have: these worked when the tool was written
WORKING = {
    ("toolkit2:rknn_mobilenet_demo", "mobilenet_v2"): {"checked"},
    ("toolkit2:rknn_dynshape_inference", "mobilenet_v2_dynamic"): {"ok"},
    ("toolkit2:rknn_dynshape_inference_zero_copy", "mobilenet_v2_dynamic"): {"ok"},
    ("toolkit2:rknn_yolov5_demo", "yolov5s"): {"ok"},
    ("toolkit2:rknn_yolov5_demo", "yolov5n"): {"ok"},
    ("zoo:mobilenet", "mobilenet_v2"): {"checked"},
    ("zoo:resnet", "resnet50"): {"ok"},
    ("zoo:yolov5", "yolov5s"): {"ok"},
    ("zoo:yolov5", "yolov5n"): {"ok"},
    ("zoo:PPOCR-Det", "ppocr_det"): {"checked"},
}
#: these build and run, and stop at RKNN_QUERY_CUSTOM_STRING, which the simulator refuses
#: (a simulator gap): once answered they must pass their top-1 check
CUSTOM_STRING = {
    ("toolkit2:rknn_create_mem_demo", "mobilenet_v2"),
    ("toolkit2:rknn_benchmark", "mobilenet_v2"),
    ("toolkit2:rknn_benchmark", "yolov5s"),
    ("toolkit2:rknn_benchmark", "ppocr_det"),
    ("toolkit2:rknn_internal_mem_reuse_demo", "mobilenet_v2"),
    ("toolkit2:rknn_multiple_input_demo", "mobilenet_v2"),
    ("toolkit2:rknn_common_test", "mobilenet_v2"),
}


def test_help() -> None:
    proc = subprocess.run([sys.executable, str(TOOL), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--toolkit2" in proc.stdout and "--model-zoo" in proc.stdout and "--out" in proc.stdout


def test_needs_a_checkout() -> None:
    proc = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--toolkit2" in proc.stderr


def test_holds_no_rockchip_code() -> None:
    text = TOOL.read_text()
    for name in THEIR_FUNCTIONS:
        # a C or C++ definition (a return type before the name) or a Python one
        definition = re.compile(r"^[ \t]*(?:[A-Za-z_][\w:<>]*[\s*&]+)+"
                                + re.escape(name) + r"\s*\([^;]*$|^\s*def\s+" + re.escape(name) + r"\b", re.M)
        assert not definition.search(text), f"the tool defines {name}"
    assert "STB_IMAGE_IMPLEMENTATION" not in text
    assert '#include "rknn_api.h"' not in text


# ----------------------------------------------------------------------------- with checkouts

TOOLKIT2 = os.environ.get("RKNN_TOOLKIT2_DIR")
MODEL_ZOO = os.environ.get("RKNN_MODEL_ZOO_DIR")
needs_checkouts = pytest.mark.skipif(
    not (TOOLKIT2 and MODEL_ZOO and Path(TOOLKIT2).is_dir() and Path(MODEL_ZOO).is_dir()),
    reason="set RKNN_TOOLKIT2_DIR and RKNN_MODEL_ZOO_DIR to checkouts of Rockchip's repositories")


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Dict[tuple, dict]:
    work = tmp_path_factory.mktemp("rockchip_c_examples")
    out = work / "rows.json"
    report = work / "report.md"
    proc = subprocess.run([sys.executable, str(TOOL), "--toolkit2", str(TOOLKIT2), "--model-zoo", str(MODEL_ZOO),
                           "--work", str(work / "w"), "--json", str(out), "--out", str(report)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert report.read_text().startswith("Library: ")
    listed: List[dict] = json.loads(out.read_text())
    return {(r["example"], r["model"]): r for r in listed}


def _opencv_missing(row: dict) -> bool:
    return row["status"] == "skipped" and "OpenCV" in row["verdict"]


@needs_checkouts
def test_working_examples_still_work(rows: Dict[tuple, dict]) -> None:
    bad = []
    for key, statuses in WORKING.items():
        row = rows.get(key)
        if row is not None and _opencv_missing(row):
            continue
        if row is None or row["status"] not in statuses:
            bad.append(f"{key}: {row and row['verdict']}")
    assert not bad, "\n".join(bad)


@needs_checkouts
def test_custom_string_examples_build_and_stop_only_there(rows: Dict[tuple, dict]) -> None:
    bad = []
    for key in CUSTOM_STRING:
        row = rows.get(key)
        if row is not None and _opencv_missing(row):
            continue
        if row is None or row["built"] != "yes":
            bad.append(f"{key}: not built: {row and row['verdict']}")
        elif row["status"] == "gap":
            if "RKNN_QUERY_CUSTOM_STRING" not in row["e_line"]:
                bad.append(f"{key}: a new refusal: {row['e_line']}")
        elif row["status"] not in ("ok", "checked"):
            bad.append(f"{key}: {row['verdict']}")
        elif row["model"] == "mobilenet_v2" and row["status"] != "checked":
            bad.append(f"{key}: ran but its top-1 was not checked: {row['verdict']}")
    assert not bad, "\n".join(bad)


@needs_checkouts
def test_no_example_produces_a_wrong_answer(rows: Dict[tuple, dict]) -> None:
    wrong = [f"{k}: {r['verdict']}" for k, r in rows.items() if r["status"] in ("wrong", "build-error")]
    assert not wrong, "\n".join(wrong)


@needs_checkouts
def test_tool_copies_no_line_of_their_sources() -> None:
    """No line of 30 characters or more of the examples' sources appears in the tool."""
    sys.path.insert(0, str(ROOT / "tools"))
    import rockchip_c_examples as tool
    text = TOOL.read_text()
    roots = {"toolkit2": Path(TOOLKIT2), "zoo": Path(MODEL_ZOO)}  # type: ignore[arg-type]
    copied = []
    for ex in tool.EXAMPLES:
        files = [roots[ex.repo] / ex.directory / s for s in ex.sources] + [roots[ex.repo] / s for s in ex.repo_sources]
        for path in files:
            if not path.exists():
                continue
            for line in path.read_text(errors="replace").splitlines():
                line = line.strip()
                if len(line) >= 30 and not line.startswith(("//", "/*", "*", "#include")) and line in text:
                    copied.append(f"{path.name}: {line}")
    assert not copied, "\n".join(copied[:20])
