"""The course's one pretrained model and its real images.

ppocr_det is PaddleOCR's PP-OCRv4 mobile text detector (Apache-2.0), as the RapidOCR
project ships it inside its PyPI wheel rapidocr-onnxruntime 1.4.4.  The build downloads that
wheel with pip, checks its sha256 and the model's, and takes the ONNX file out unchanged:
it is the simulator's fp32 twin.  The compiler gets a copy whose input is fixed at
1x3x480x480, the size the RKNN model zoo compiles this network at.

The frames (data/frames/) are images scikit-image bundles in its wheel; calibration and the
toolkit-simulator probes are letterboxed views of them (whole images and seeded zooms).
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

WHEEL = "rapidocr-onnxruntime==1.4.4"
WHEEL_FILE = "rapidocr_onnxruntime-1.4.4-py3-none-any.whl"
WHEEL_SHA256 = "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"
MEMBER = "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"
MODEL_SHA256 = "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"
MODEL_BYTES = 4745517
SIDE = 480
INPUT_NAME = "x"
OUTPUT_NAME = "sigmoid_0.tmp_0"

# data/frames/<name>.png <- skimage.data.<function>(): (function, the file in the wheel)
FRAMES = {
    "page": ("page", "page.png"),
    "text": ("text", "text.png"),
    "coffee": ("coffee", "coffee.png"),
    "rocket": ("rocket", "rocket.jpg"),
}
N_CALIBRATION_ZOOMS = 3   # per frame, on top of the whole frame
N_PROBES = 8              # views simulated by the toolkit (toolkit_int8.npz)
PROBE_ZOOMS = {"page": 3, "text": 1}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_model(workdir: Path) -> bytes:
    """The original ONNX bytes, from the wheel pip downloads into workdir/src (once)."""
    src = workdir / "src"
    wheel = src / WHEEL_FILE
    if not wheel.exists():
        src.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", WHEEL, "-d", str(src)],
                       check=True)
    got = _sha256(wheel.read_bytes())
    if got != WHEEL_SHA256:
        raise ValueError(f"{wheel} has sha256 {got}, expected {WHEEL_SHA256}")
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read(MEMBER)
    if _sha256(data) != MODEL_SHA256 or len(data) != MODEL_BYTES:
        raise ValueError(f"{MEMBER} in {WHEEL_FILE} is not the recorded file ({len(data)} B, {_sha256(data)})")
    return data


def fixed_shape(model: bytes, side: int = SIDE) -> bytes:
    """The same network with its input fixed to 1x3xSIDExSIDE and its output to 1x1xSIDExSIDE
    (the compiler wants static shapes; the report reads the io dims from this graph)."""
    import onnx
    proto = onnx.load_model_from_string(model)
    for value, dims in ((proto.graph.input[0], (1, 3, side, side)), (proto.graph.output[0], (1, 1, side, side))):
        for dim, size in zip(value.type.tensor_type.shape.dim, dims):
            dim.Clear()
            dim.dim_value = size
    del proto.graph.value_info[:]   # stale symbolic shapes; the toolkit infers its own
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def export_frames(outdir: Path) -> dict[str, dict[str, Any]]:
    """Write data/frames/<name>.png from scikit-image's bundled images; PNG files in the
    wheel are copied byte for byte, the JPEG is decoded and saved as PNG (lossless from there)."""
    import skimage
    import skimage.data
    from PIL import Image
    from importlib.metadata import distribution
    outdir.mkdir(parents=True, exist_ok=True)
    # BSD-3-Clause asks redistributions to carry the notice: the wheel's own licence file
    (outdir / "LICENSE-scikit-image.txt").write_text(distribution("scikit-image").read_text("LICENSE.txt"))
    bundled = Path(skimage.__file__).parent / "data"
    info = {}
    for name, (function, member) in FRAMES.items():
        source = bundled / member
        target = outdir / f"{name}.png"
        if member.endswith(".png"):
            target.write_bytes(source.read_bytes())
        else:
            Image.open(source).save(target, optimize=True)
        image = np.asarray(Image.open(target))
        expected = getattr(skimage.data, function)()
        if not np.array_equal(image, expected):
            raise ValueError(f"{target} does not hold skimage.data.{function}()")
        info[name] = {"function": f"skimage.data.{function}()", "wheel_file": f"skimage/data/{member}",
                      "shape": list(image.shape), "sha256": _sha256(target.read_bytes()),
                      "scikit_image": skimage.__version__}
    return info


def load_frame(path: Path) -> np.ndarray:
    """An HxWx3 uint8 RGB image (grey frames repeated over the three channels)."""
    from PIL import Image
    return np.asarray(Image.open(path).convert("RGB"))


def letterbox(image: np.ndarray, side: int = SIDE) -> np.ndarray:
    """side x side x 3 uint8: the image scaled to fit (aspect kept, bilinear), centred,
    padded with 0."""
    from PIL import Image
    h, w = image.shape[:2]
    scale = min(side / h, side / w)
    new_w, new_h = max(1, round(w * scale)), max(1, round(h * scale))
    resized = np.asarray(Image.fromarray(image).resize((new_w, new_h), Image.BILINEAR))
    out = np.zeros((side, side, 3), np.uint8)
    y, x = (side - new_h) // 2, (side - new_w) // 2
    out[y:y + new_h, x:x + new_w] = resized
    return out


def views(frames_dir: Path, zooms: dict[str, int], seed: int) -> list[tuple[str, np.ndarray]]:
    """Letterboxed SIDE x SIDE views of every frame: the whole frame, then zooms[name] seeded
    crops (a quarter to two thirds of each side, anywhere in the frame)."""
    rng = np.random.default_rng(seed)
    out = []
    for name in FRAMES:
        image = load_frame(frames_dir / f"{name}.png")
        out.append((f"{name}", letterbox(image)))
        h, w = image.shape[:2]
        for k in range(zooms.get(name, 0)):
            frac = rng.uniform(0.25, 0.67)
            ch, cw = max(8, int(h * frac)), max(8, int(w * frac))
            y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
            out.append((f"{name}[{y}:{y + ch},{x}:{x + cw}]", letterbox(image[y:y + ch, x:x + cw])))
    return out


def calibration_set(frames_dir: Path, seed: int) -> tuple[list[np.ndarray], list[str]]:
    """NCHW float32 uint8-valued images for the toolkit's dataset, and what each one is."""
    chosen = views(frames_dir, {name: N_CALIBRATION_ZOOMS for name in FRAMES}, seed)
    return [img.transpose(2, 0, 1)[None].astype(np.float32) for _, img in chosen], [n for n, _ in chosen]


def probe_set(frames_dir: Path, seed: int) -> tuple[np.ndarray, list[str]]:
    """N_PROBES uint8 NHWC views for the toolkit's simulator: each frame whole (also among the
    calibration views), and zooms of the text frames drawn with another seed than calibration's
    (held out).  Zooms of the
    photographs are left out: they add no text and much to the file (photos compress badly)."""
    chosen = views(frames_dir, PROBE_ZOOMS, seed + 1)
    if len(chosen) != N_PROBES:
        raise ValueError(f"{len(chosen)} probe views, expected {N_PROBES}")
    return np.stack([img for _, img in chosen]), [n for n, _ in chosen]
