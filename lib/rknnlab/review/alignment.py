"""Alignment, re-measured: what is documented, and what a zero-copy input really needs.

A widely copied recipe says every NPU buffer must start on a 64-byte boundary. What the
documents say is about rows, not start addresses. The User Guide V2.3.0 (Table 5-2) has two
columns: on RK3562, RK3576 and RK3588 (and RV1103/RV1106) a zero-copy 4-D input with 1, 3 or
4 channels has its width 16-byte aligned, any other input its total size 16-byte aligned; on
RK3566 and RK3568 (and RV1103B/RV1106B) both are 8. The guide words it in bytes; the attr's
w_stride counts pixels (elements along the width): read it, never compute it. The header
says w_stride is read-only and h_stride write-only; the buffer is sized from size_with_stride.

- :func:`alignment_table`: the documented alignment per SoC next to what the course's
  compiler reports give for digits_cnn's input.
- :func:`zero_copy_rows`: the digits test set written into one bound input mem with rows at
  w_stride, at the width, or 64 bytes apart; accuracy and agreement with rknn_inputs_set.
- :func:`unaligned_inputs_set`: rknn_inputs_set from an odd address gives the same outputs
  (the runtime copies the buffer).
- :func:`undersized_bind`: a bound input of n_elems bytes instead of size_with_stride.

Each function runs on ``rt`` (default: rknnlab.open_runtime("auto", soc): a board when
there is one, else the simulator) and says which in ``.source``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import numpy as np

from .. import models
from ..rknn import abi, buffers, errors

#: the row pitches zero_copy_rows knows: rows as the native attr says, rows at the image
#: width (a plain copy of a dense image), rows 64 bytes apart (the recipe read literally)
ROWS = ("w_stride", "width", "64 bytes")

#: User Guide V2.3.0 Table 5-2, "16-byte aligned" as the guide words it: the width of a
#: zero-copy 4-D input with 1, 3 or 4 channels (the attr's w_stride holds it, in pixels)
DOCUMENTED_WIDTH_ALIGNMENT = {"rk3588": 16, "rk3576": 16, "rk3562": 16, "rv1103": 16, "rv1106": 16,
                              "rk3566": 8, "rk3568": 8, "rv1103b": 8, "rv1106b": 8}
#: the same table, the total size (bytes) of any other zero-copy input
DOCUMENTED_TOTAL_ALIGNMENT = dict(DOCUMENTED_WIDTH_ALIGNMENT)

#: the SoCs the course ships reports for, and RK3566 (it runs the rk3568 build)
_TABLE_SOCS = ("rk3588", "rk3576", "rk3568", "rk3566", "rk3562")

#: the simulator assumption about an undersized bound input (rknnlab.sim.ASSUMPTIONS)
UNDERSIZED_ASSUMPTION = "A62"

#: what public logs show a board doing with an undersized zero-copy input (A62)
BOARD_UNDERSIZED = (
    "A board may accept the bind (return 0) with a warning in the runtime's log that the mem is "
    "smaller than the tensor (the facts sheet records the warning; its exact wording is "
    "unconfirmed). The run may then fail: the log says 'failed to submit' and rknn_run returns "
    "-1 (RKNN_ERR_FAIL), as in airockchip/rknn-toolkit2#554 (zero-copy, librknnrt 2.3.2); or the "
    "NPU reads past the mem. The User Guide V2.3.0 (§10.9) ties 'failed to submit' in the first "
    "conv with zero-copy to an undersized input.")


def _runtime(rt: Any, soc: Optional[str]) -> Any:
    if rt is not None:
        return rt
    import rknnlab
    return rknnlab.open_runtime("auto", soc)


def _model_file(rt: Any, model: str) -> str:
    return str(models.model_path(model, models.SOC_MODELS.get(rt.soc, rt.soc)))


def _hwc(attr: abi.rknn_tensor_attr) -> Tuple[int, int, int]:
    """(height, width, channels) of a 4-D image attr in NHWC or NCHW."""
    dims = buffers.attr_dims(attr)
    if len(dims) != 4:
        raise ValueError(f"a 4-D image input is needed, this one has dims {list(dims)}")
    if attr.fmt == abi.RKNN_TENSOR_NCHW:
        return dims[2], dims[3], dims[1]
    return dims[1], dims[2], dims[3]


# --------------------------------------------------------------------------- the table
def alignment_table() -> Any:
    """Per SoC: the documented zero-copy input alignment (User Guide V2.3.0 Table 5-2: the
    width of a 4-D input with 1, 3 or 4 channels, the total size of any other), and
    digits_cnn's native input attr as the course's compiler report for that SoC gives it
    (a pandas DataFrame). ``.attrs["source"]``: where the numbers come from, in one line
    (printed under the table); ``.attrs["detail"]``: the same in full (the table's two
    columns, bytes against pixels, and the rule behind the reports' w_stride)."""
    import pandas as pd
    rows = []
    for soc in _TABLE_SOCS:
        build = models.SOC_MODELS.get(soc, soc)
        native = models.load_report("digits_cnn", build).data["inputs"][0]["native"]
        width, total = DOCUMENTED_WIDTH_ALIGNMENT[soc], DOCUMENTED_TOTAL_ALIGNMENT[soc]
        rows.append({
            "SoC": soc,
            "documented width alignment": f"{width}-byte",
            "documented total-size alignment": f"{total}-byte",
            "digits_cnn w_stride": int(native["w_stride"]),
            "digits_cnn size_with_stride": int(native["size_with_stride"]),
            "where the numbers come from": (
                f"User Guide V2.3.0 Tab. 5-2 ({'RK3566/RK3568' if width == 8 else 'RK3562/RK3576/RK3588'})"
                + f"; {build}.report.json (NativeShape, rule R1)"
                + (" — RK3566 runs the rk3568 build" if build != soc else "")),
        })
    table = pd.DataFrame(rows)
    # one printed line (chapter 7 says bytes against pixels in its own words); "detail" has the rest
    table.attrs["source"] = ("User Guide V2.3.0 Table 5-2; compiler reports in "
                             "data/models/digits_cnn/<soc>.report.json")
    table.attrs["detail"] = (
        "documented: User Guide V2.3.0 Table 5-2, two columns (RK3562/RK3576/RK3588: 16; "
        "RK3566/RK3568: 8): the width of a zero-copy 4-D input with 1, 3 or 4 channels, otherwise "
        "the total size; the guide words it in bytes, the attr's w_stride counts pixels (read it, "
        "never compute it); digits_cnn: the course's compiler reports "
        "(data/models/digits_cnn/<soc>.report.json: w_stride = width x the native C1, assumption "
        "R1 in data/models/README.md)")
    return table


# --------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class RowsResult:
    """The digits test set through one bound zero-copy input, rows at one pitch."""
    rows: str                 #: "w_stride", "width" or "64 bytes"
    soc: str
    pitch: int                #: bytes from one written row to the next
    w_stride: int             #: the native input attr's w_stride (pixels)
    size_with_stride: int     #: the native input attr's size_with_stride (bytes)
    mem_size: int             #: bytes of the bound mem
    n: int                    #: test images run
    accuracy: float           #: zero-copy route
    reference_accuracy: float  #: rknn_inputs_set route, same images
    agreement: float          #: fraction with the same predicted digit as rknn_inputs_set
    identical: float          #: fraction with bit-identical outputs
    source: str
    written: np.ndarray = field(repr=False, compare=False)  #: the first image (H, W) as written
    seen: np.ndarray = field(repr=False, compare=False)     #: rows at w_stride in the mem: what the NPU reads
    predicted: np.ndarray = field(repr=False, compare=False)  #: zero-copy route's digit per image
    labels: np.ndarray = field(repr=False, compare=False)     #: the true digit per image, same order

    def __repr__(self) -> str:
        return (f"rows at {self.rows}: {self.pitch} B apart, mem {self.mem_size} B (w_stride "
                f"{self.w_stride} px, size_with_stride {self.size_with_stride} B)\n"
                f"accuracy {self.accuracy:.1%} (rknn_inputs_set {self.reference_accuracy:.1%}) on {self.n} "
                f"test digits; same digit as rknn_inputs_set: {self.agreement:.1%}\n"
                f"source: {self.source}")

    __str__ = __repr__


def _testset(soc: str, n: Optional[int], seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """digits_cnn's test set: images (N, 8, 8) uint8 and labels; ``n`` of them picked
    with ``seed`` (all, in file order, when n is None)."""
    path = models.model_path("digits_cnn", models.SOC_MODELS.get(soc, soc)).parent / "testset.npz"
    with np.load(path, allow_pickle=False) as data:
        images, labels = data["images"][:, 0], data["labels"].astype(np.int64)
    if n is not None:
        if not 0 < n <= len(images):
            raise ValueError(f"n={n}: the test set has {len(images)} images")
        pick = np.random.default_rng(seed).choice(len(images), n, replace=False)
        images, labels = images[pick], labels[pick]
    return np.ascontiguousarray(images), labels


def _float_output(rt: Any, ctx: int) -> Tuple[np.ndarray, List[abi.rknn_output]]:
    """A float32 buffer for output 0 (want_float = 1: n_elems x 4 bytes), allocated once."""
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
    out = np.empty(attr.n_elems, np.float32)
    return out, [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=out.ctypes.data, size=out.nbytes)]


def _outputs_via_inputs_set(rt: Any, model_file: str, images: np.ndarray) -> np.ndarray:
    """Outputs of the general API route: rknn_inputs_set of each dense uint8 NHWC image."""
    ctx = rt.init(model_file)
    try:
        out, outs = _float_output(rt, ctx)
        results = np.empty((len(images), out.size), np.float32)
        frame = np.empty(images.shape[1:] + (1,), np.uint8)
        inputs = [buffers.input_from_array(0, frame, fmt=abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_UINT8)]
        for i, image in enumerate(images):
            frame[..., 0] = image
            rt.inputs_set(ctx, inputs)
            rt.run(ctx)
            rt.outputs_get(ctx, outs)
            results[i] = out
            rt.outputs_release(ctx, outs)
        return results
    finally:
        rt.destroy(ctx)


def zero_copy_rows(rows: str = "w_stride", model: str = "digits_cnn", n: Optional[int] = None,
                   seed: int = 0, rt: Any = None, soc: Optional[str] = None) -> RowsResult:
    """Write the digits test set into one input mem bound once with rknn_set_io_mem (the
    native input attr, type set to UINT8 as Rockchip's zero-copy demo does), rows ``rows``
    apart: "w_stride" (the native attr's), "width" (a dense 8-pixel image copied as is) or
    "64 bytes". The mem holds size_with_stride bytes, or more when 64-byte rows need it.
    Each image: write, rknn_mem_sync TO_DEVICE, rknn_run, rknn_outputs_get. The same images
    through rknn_inputs_set give the reference."""
    if rows not in ROWS:
        raise ValueError(f"rows={rows!r}: choose one of {', '.join(map(repr, ROWS))}")
    if model != "digits_cnn":
        raise ValueError("zero_copy_rows measures accuracy on digits_cnn's test set: model='digits_cnn'")
    rt = _runtime(rt, soc)
    images, labels = _testset(rt.soc, n, seed)
    model_file = _model_file(rt, model)
    reference = _outputs_via_inputs_set(rt, model_file, images)

    ctx = rt.init(model_file)
    mem = None
    try:
        attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
        height, width, channels = _hwc(attr)
        attr.type, attr.fmt = abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_NHWC  # the bytes we write
        w_stride = int(attr.w_stride) or width  # w_stride 0 means rows of exactly the width
        pitch = {"w_stride": w_stride * channels, "width": width * channels, "64 bytes": 64}[rows]
        # the bound-buffer size rule (size_with_stride); 64-byte rows need height x 64 bytes
        mem_size = max(int(attr.size_with_stride), height * pitch)
        mem = rt.create_mem(ctx, mem_size)
        rt.set_io_mem(ctx, mem, attr)  # once: the binding holds for every run
        view = buffers.mem_view(mem, np.uint8, mem_size)
        written_rows = view[:height * pitch].reshape(height, pitch)[:, :width * channels]
        npu_rows = view[:height * w_stride * channels].reshape(height, w_stride * channels)[:, :width * channels]
        out, outs = _float_output(rt, ctx)
        results = np.empty_like(reference)
        seen = None
        for i, image in enumerate(images):
            written_rows[...] = image.reshape(height, width * channels)
            if seen is None:  # rows read at w_stride, as the attr says the NPU reads them
                seen = npu_rows.reshape(height, width, channels)[..., 0].copy()
            rt.mem_sync(ctx, mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
            rt.run(ctx)
            rt.outputs_get(ctx, outs)
            results[i] = out
            rt.outputs_release(ctx, outs)
    finally:
        if mem is not None:
            rt.destroy_mem(ctx, mem)
        rt.destroy(ctx)

    predicted, expected = results.argmax(axis=1), reference.argmax(axis=1)
    return RowsResult(
        rows=rows, soc=rt.soc, pitch=pitch, w_stride=w_stride, size_with_stride=int(attr.size_with_stride),
        mem_size=mem_size, n=len(images), accuracy=float((predicted == labels).mean()),
        reference_accuracy=float((expected == labels).mean()), agreement=float((predicted == expected).mean()),
        identical=float((results == reference).all(axis=1).mean()), source=rt.source,
        written=images[0].copy(), seen=seen, predicted=predicted, labels=labels)


# --------------------------------------------------------------------------- inputs_set
@dataclass(frozen=True)
class InputsSetResult:
    """rknn_inputs_set from an address that is not 64-byte aligned, against an aligned one."""
    model: str
    odd_address_mod64: int      #: address % 64 of the odd buffer (never 0)
    aligned_address_mod64: int  #: address % 64 of the aligned buffer (0)
    identical: bool             #: the two runs' outputs are byte-equal
    max_abs_diff: float         #: largest difference of the float outputs
    source: str

    def __repr__(self) -> str:
        verdict = "identical outputs" if self.identical else f"outputs differ (max {self.max_abs_diff:g})"
        return (f"{self.model}: rknn_inputs_set at address % 64 = {self.odd_address_mod64} and at "
                f"% 64 = {self.aligned_address_mod64}: {verdict}\nsource: {self.source}")

    __str__ = __repr__


def _placed(backing: np.ndarray, remainder: int, shape: Tuple[int, ...]) -> np.ndarray:
    """A view of ``backing`` of ``shape`` (uint8) whose address % 64 == remainder."""
    offset = (remainder - backing.ctypes.data) % 64
    nbytes = int(np.prod(shape))
    return backing[offset:offset + nbytes].reshape(shape)


def unaligned_inputs_set(model: str = "mobilenet_v2", seed: int = 0, rt: Any = None,
                         soc: Optional[str] = None) -> InputsSetResult:
    """One seeded uint8 frame given to rknn_inputs_set twice on one context: from a view
    at an odd address (address % 64 == 1) of a bytearray-backed array, then from a view
    at a 64-byte boundary. The runtime copies (and converts) the bytes, so the outputs
    are the same."""
    rt = _runtime(rt, soc)
    ctx = rt.init(_model_file(rt, model))
    try:
        attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
        height, width, channels = _hwc(attr)
        shape = (height, width, channels)
        frame = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
        # bytearray memory: Python's allocator, no alignment promised beyond 8 or 16 bytes
        backing = np.frombuffer(bytearray(frame.nbytes + 128), np.uint8)
        odd, aligned = _placed(backing, 1, shape), _placed(backing[64:], 0, shape)
        outputs = []
        n_out = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
        for view in (odd, aligned):
            view[...] = frame
            rt.inputs_set(ctx, [buffers.input_from_array(0, view, fmt=abi.RKNN_TENSOR_NHWC,
                                                          type=abi.RKNN_TENSOR_UINT8)])
            rt.run(ctx)
            got = [abi.rknn_output(index=k, want_float=1, is_prealloc=0) for k in range(n_out)]
            rt.outputs_get(ctx, got)
            try:
                outputs.append([buffers.output_view(o, np.float32).copy() for o in got])
            finally:
                rt.outputs_release(ctx, got)
        odd_mod, aligned_mod = odd.ctypes.data % 64, aligned.ctypes.data % 64
    finally:
        rt.destroy(ctx)
    first, second = outputs
    identical = all(a.tobytes() == b.tobytes() for a, b in zip(first, second))
    diff = max(float(np.max(np.abs(a - b))) if a.size else 0.0 for a, b in zip(first, second))
    return InputsSetResult(model=model, odd_address_mod64=int(odd_mod), aligned_address_mod64=int(aligned_mod),
                           identical=identical, max_abs_diff=diff, source=rt.source)


# --------------------------------------------------------------------------- undersized
@dataclass(frozen=True)
class UndersizedBind:
    """rknn_set_io_mem of an input mem of n_elems bytes instead of size_with_stride."""
    model: str
    mem_size: int                         #: bytes of the mem bound (n_elems x element size)
    needed: int                           #: the native attr's size_with_stride
    error: Optional[errors.RknnError]     #: what the bind raised (None: it was accepted)
    board: str                            #: what public logs show a board doing
    assumption: str                       #: the simulator assumption behind the refusal
    source: str

    def __repr__(self) -> str:
        if self.error is not None:
            what = f"rknn_set_io_mem refused it: {self.error.code} ({self.error.name})"
        elif self.mem_size >= self.needed:
            what = "not undersized here: n_elems bytes already equal size_with_stride on this SoC"
        else:
            what = "rknn_set_io_mem accepted it (return 0)"
        return (f"{self.model}: input mem of {self.mem_size} B (n_elems), size_with_stride {self.needed} B\n"
                f"{what}\n"
                f"a board may accept the bind with a warning, then fail the run with -1 "
                f"({self.assumption})\nsource: {self.source}")

    __str__ = __repr__


def undersized_bind(model: str = "digits_cnn", rt: Any = None, soc: Optional[str] = None) -> UndersizedBind:
    """Bind digits_cnn's input with a mem of n_elems bytes (64) and the native attr, whose
    size_with_stride is 128 on rk3588: the simulator refuses at the bind (A26, A62)."""
    rt = _runtime(rt, soc)
    ctx = rt.init(_model_file(rt, model))
    mem = None
    error: Optional[errors.RknnError] = None
    try:
        attr = rt.query(ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
        size = int(attr.n_elems) * np.dtype(abi.TYPE_TO_NUMPY[attr.type]).itemsize
        mem = rt.create_mem(ctx, size)
        try:
            rt.set_io_mem(ctx, mem, attr)
        except errors.RknnError as exc:
            error = exc
    finally:
        if mem is not None:
            rt.destroy_mem(ctx, mem)
        rt.destroy(ctx)
    return UndersizedBind(model=model, mem_size=size, needed=int(attr.size_with_stride), error=error,
                          board=BOARD_UNDERSIZED, assumption=UNDERSIZED_ASSUMPTION, source=rt.source)


__all__ = ["ROWS", "DOCUMENTED_WIDTH_ALIGNMENT", "DOCUMENTED_TOTAL_ALIGNMENT", "alignment_table",
           "RowsResult", "zero_copy_rows",
           "InputsSetResult", "unaligned_inputs_set", "UndersizedBind", "undersized_bind"]
