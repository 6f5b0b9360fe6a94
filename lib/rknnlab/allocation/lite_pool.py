"""N pipelines of one model from Python: N RKNNLite objects (rknn-toolkit-lite2's way: its
class has no rknn_dup_context) against the C API's one rknn_init and N - 1
rknn_dup_context, measured in this process."""
from __future__ import annotations

import contextlib
import io
from typing import Any, Dict, List, Optional

import numpy as np

from ..board import SOC_NPU_CORES
from ..rknn import abi
from ._common import MEASURED, dma_total, frame, model_file, run_label, runtime

#: the two ways lite_vs_dup compares, in its row order
LITE_WAYS = ("RKNNLite objects", "rknn_init + rknn_dup_context")

#: RKNNLite's one-core masks, one per NPU core (the wheel's constants have the same values)
_CORE_MASKS = (("NPU_CORE_0", abi.RKNN_NPU_CORE_0), ("NPU_CORE_1", abi.RKNN_NPU_CORE_1),
               ("NPU_CORE_2", abi.RKNN_NPU_CORE_2))


class _Watched:
    """``rt`` as the simulated RKNNLite sees it, noting every context its rknn_init makes, so
    that those contexts' DMA totals can be queried as the C path's are (RKNNLite itself has
    no query). The real wheel on a board never calls it: there the list stays empty."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self.contexts: List[int] = []

    def init(self, *args: Any, **kwargs: Any) -> int:
        ctx = self._rt.init(*args, **kwargs)
        self.contexts.append(ctx)
        return ctx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)


def _memory() -> Dict[str, int]:
    from ..layers import process_memory
    now = process_memory()
    return {"rss": int(now.get("VmRSS", 0)), "heap": int(now.get("heap in use", 0))}


def _rise(before: Dict[str, int], after: Dict[str, int]) -> Dict[str, int]:
    return {key: after[key] - before[key] for key in before}


def _masks(rt: Any, n: int) -> List[str]:
    """One RKNNLite core mask per object: NPU_CORE_0, _1, _2 in turn where the SoC has more
    than one core (the wheel takes a mask only on RK3576 and RK3588), else NPU_CORE_AUTO."""
    cores = SOC_NPU_CORES.get(str(rt.soc).lower()) or 1
    if cores < 2:
        return ["NPU_CORE_AUTO"] * n
    return [_CORE_MASKS[i % cores][0] for i in range(n)]


def _input_like(rt: Any, path: str) -> np.ndarray:
    """A uint8 NHWC input of the model's shape (its input attr, asked of ``rt``)."""
    ctx = rt.init(path)
    try:
        a = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
        dims = [int(d) for d in a.dims[:a.n_dims]]
    finally:
        rt.destroy(ctx)
    return np.zeros(dims, dtype=np.uint8)


def _lite_objects(rt: Any, path: str, masks: List[str], x: np.ndarray, log: io.StringIO) -> List[Any]:
    """One RKNNLite per mask: load_rknn, init_runtime(core_mask=...), one inference."""
    from ..lite import RKNNLite, using_runtime
    objects: List[Any] = []
    with using_runtime(rt), contextlib.redirect_stdout(log):
        try:
            for mask in masks:
                lite = RKNNLite()
                objects.append(lite)
                if lite.load_rknn(path) != 0 or lite.init_runtime(core_mask=getattr(RKNNLite, mask)) != 0:
                    raise RuntimeError(f"RKNNLite could not load {path}: {log.getvalue().strip()}")
                if lite.inference(inputs=[x]) is None:
                    raise RuntimeError(f"RKNNLite.inference failed: {log.getvalue().strip()}")
        except BaseException:
            _release(objects, log)
            raise
    return objects


def _release(objects: List[Any], log: io.StringIO) -> None:
    with contextlib.redirect_stdout(log):
        for lite in objects:
            lite.release()
    objects.clear()


def _dup_contexts(rt: Any, path: str, n: int, x: np.ndarray) -> List[int]:
    """One rknn_init and n - 1 rknn_dup_context of it, each run once (rknn_inputs_set)."""
    contexts = [rt.init(path)]
    try:
        contexts += [rt.dup_context(contexts[0]) for _ in range(n - 1)]
        for ctx in contexts:
            rt.inputs_set(ctx, [abi.rknn_input(index=0, buf=x.ctypes.data, size=x.nbytes,
                                               type=abi.RKNN_TENSOR_UINT8, fmt=abi.RKNN_TENSOR_NHWC)])
            rt.run(ctx)
    except BaseException:
        _destroy(rt, contexts)
        raise
    return contexts


def _destroy(rt: Any, contexts: List[int]) -> None:
    for ctx in reversed(contexts):
        rt.destroy(ctx)
    contexts.clear()


def lite_vs_dup(model: str = "mobilenet_v2", n: int = 3, rt: Optional[Any] = None) -> Any:
    """What ``n`` pipelines of ``model`` hold, measured in this process on ``rt`` (default:
    the simulated RK3588), two ways, each after one inference of every pipeline:

    - "RKNNLite objects": ``n`` rknnlab.lite.RKNNLite objects, each load_rknn +
      init_runtime(core_mask=NPU_CORE_0, _1, _2 in turn; AUTO on a one-core SoC) +
      inference. RKNNLite has no dup_context: one object per NPU core is how some of its
      users run a model on several cores (leafqycc/rknn-multi-threaded's rknnpool.py gives
      object i the core i % 3). immich-app/immich#15241 reports only that three RKNNLite
      instances (all on NPU_CORE_AUTO there) tripled the memory.
    - "rknn_init + rknn_dup_context": one rknn_init from the path and ``n`` - 1
      rknn_dup_context, each run once through rknn_inputs_set.

    Rows: way, contexts, dma_bytes (the sum of the contexts' total_dma_allocated_size:
    on a board the wheel's contexts cannot be queried, so NaN there), python_model_bytes
    (the model file bytes Python objects hold: each RKNNLite keeps its file as
    ``rknn_data``), heap_rise_bytes and rss_rise_bytes (glibc's heap in use and VmRSS,
    after against before; both ways are warmed up first so one-off costs are not
    counted; RSS can rise less than the heap where malloc reuses freed pages), kind.
    ``attrs``: model, n, masks, file_bytes, weights_bytes (total_weight_size), log (the
    RKNNLite lines it printed), source. ~0.5 s on the simulator for mobilenet_v2."""
    if int(n) < 1:
        raise ValueError(f"n={n}: a positive number of pipelines")
    n = int(n)
    rt = runtime(rt)
    path = model_file(rt, model)
    with open(path, "rb") as f:
        file_bytes = len(f.read())
    x = _input_like(rt, path)
    masks = _masks(rt, n)
    watched, log = _Watched(rt), io.StringIO()
    _release(_lite_objects(watched, path, masks[:1], x, log), log)     # warm-up: one-off costs
    _destroy(rt, _dup_contexts(rt, path, 1, x))
    watched.contexts.clear()
    log = io.StringIO()

    before = _memory()
    objects = _lite_objects(watched, path, masks, x, log)
    try:
        lite_rise = _rise(before, _memory())
        python_bytes = sum(len(b) for b in (getattr(o, "rknn_data", None) for o in objects)
                           if isinstance(b, (bytes, bytearray)))
        lite_dma: Optional[int] = (sum(dma_total(rt, c) for c in watched.contexts)
                                   if len(watched.contexts) == n else None)
    finally:
        _release(objects, log)

    before = _memory()
    contexts = _dup_contexts(rt, path, n, x)
    try:
        dup_rise = _rise(before, _memory())
        dup_dma = sum(dma_total(rt, c) for c in contexts)
        weights = int(rt.query(contexts[0], abi.RKNN_QUERY_MEM_SIZE).total_weight_size)
    finally:
        _destroy(rt, contexts)

    rows = [{"way": f"{n} {LITE_WAYS[0]}", "contexts": n,
             "dma_bytes": float("nan") if lite_dma is None else lite_dma,
             "python_model_bytes": python_bytes, "heap_rise_bytes": lite_rise["heap"],
             "rss_rise_bytes": lite_rise["rss"], "kind": MEASURED},
            {"way": f"1 rknn_init + {n - 1} rknn_dup_context", "contexts": n, "dma_bytes": dup_dma,
             "python_model_bytes": 0, "heap_rise_bytes": dup_rise["heap"], "rss_rise_bytes": dup_rise["rss"],
             "kind": MEASURED}]
    table = frame(rows, run_label(rt, f"{model}, {n} pipelines, one inference each, in this process"))
    table.attrs.update(model=model, n=n, masks=masks, file_bytes=file_bytes, weights_bytes=weights,
                       log=[line for line in log.getvalue().splitlines() if line.strip()])
    return table
