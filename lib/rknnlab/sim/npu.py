"""The modeled NPU: how long a run takes, and which core it occupies.

One core: each layer takes its time under the timing law (:mod:`rknnlab.sim.timing_law`:
compute cycles at a per-SoC rate with depthwise and SiLU factors, the bytes of the layers
the compiler gives 0 cycles, CPU hand-overs), and a run adds the SoC's fixed cost per
run.  The law is fitted on the RKNN model zoo's published single-core FPS of seven models
on RK3588, RK3576, RK3566/68 and RK3562 (ASSUMPTIONS A20).

Several cores: a multi-core mask splits only the ops the API reference (p.21) names:
Conv, depthwise Conv, Add, Concat and ReLU-family activations, under the names the
compiler gives them in the shipped reports (:data:`SPLIT_OPS`); a Conv fused with SiLU
(ConvExSwish) is not split, as a public RK3588 trace shows (ASSUMPTIONS A17).  A split
layer runs 1 + 0.3 (n - 1) times faster on n cores (A44) and pays CORE_SWITCH_S for the
hand-over (A45); every other layer runs on the first core of the mask.

The NPU is process-wide: one :class:`Npu` per SoC, one lock per core.  A run
holds the locks of its cores for its modeled time, so runs on different cores
overlap in wall time and runs on the same core queue.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Sequence, Tuple

from ..rknn import abi
from . import timing_law


@dataclass(frozen=True)
class SocNpu:
    """What the timing model needs to know about one SoC's NPU."""
    cores: int
    clock_hz: float
    #: int8 multiply-accumulates one core does per cycle (for MacUsage)
    macs_per_cycle: int


#: NPU cores (facts sheet section 3) and clocks (RK3588 1 GHz, facts sheet; the
#: others are assumptions, ASSUMPTIONS A19).  MACs per cycle and core: the
#: densest layers of every shipped report but ppocr_det's (75/76 of the peak)
#: get exactly MACs / 1024 (rk3588, rk3576) or MACs / 512 (rk3568, rk3562) NPU
#: cycles from the compiler, and
#: 1024 at 1 GHz reproduces a public RK3588 board's MacUsage column (A47;
#: rk3566, with no report here, is taken as rk3568).
SOCS: Dict[str, SocNpu] = {
    "rk3588": SocNpu(cores=3, clock_hz=1.0e9, macs_per_cycle=1024),
    "rk3576": SocNpu(cores=2, clock_hz=1.0e9, macs_per_cycle=1024),
    "rk3568": SocNpu(cores=1, clock_hz=0.9e9, macs_per_cycle=512),
    "rk3566": SocNpu(cores=1, clock_hz=0.9e9, macs_per_cycle=512),
    "rk3562": SocNpu(cores=1, clock_hz=1.0e9, macs_per_cycle=512),
}
SOC_ALIASES = {"rk3588s": "rk3588"}

#: The op types a multi-core mask splits over its cores (ASSUMPTIONS A17): the
#: API reference's list (p.21: Conv, depthwise Conv, Add, Concat, ReLU-family
#: activations) under the names the compiler gives them in the shipped reports
#: (a depthwise Conv is a Conv/ConvClip there; activations appear fused:
#: ConvRelu, ConvClip = Conv + ReLU6, or a ReduceSum + Clip lowered to a Conv: Clip
#: is on the list).  Not split: ConvExSwish (Conv fused with SiLU,
#: 100 % on core 0 in a public RK3588 trace), MaxPool, Resize, Reshape, the
#: Input/OutputOperator and any op not named here: ppocr_det's ConvHardSwish and
#: ConvHardSigmoid (a Conv fused with an activation outside the list, as ConvExSwish),
#: ConvTranspose, BatchNormalizationRelu, Mul and Sigmoid.
SPLIT_OPS = frozenset({"Conv", "ConvClip", "ConvRelu", "ConvAdd", "ConvAddRelu", "ConvReluAdd",
                       "ConvLeakyRelu", "ConvLeakyReluAdd", "Relu", "Add", "Concat"})
#: Op types of the shipped reports that run on one core under every mask.
UNSPLIT_OPS = frozenset({"ConvExSwish", "MaxPool", "Resize", "Reshape", "InputOperator",
                         "OutputOperator", "ConvHardSwish", "ConvHardSigmoid", "ConvTranspose",
                         "BatchNormalizationRelu", "Mul", "Sigmoid", "ConvSigmoid", "Split", "Transpose",
                         "exDataConvert", "exSoftmax13"})
#: A split layer on n cores runs 1 + this * (n - 1) times faster (A44): 1.3x on
#: two cores, 1.6x on three (a public trace: Add and Concat 1.56-1.65x on three).
SPLIT_GAIN_PER_EXTRA_CORE = 0.3
#: Each split layer of a multi-core run pays this for handing work between the
#: cores (A45; UG230 section 5.3: core switching needs the CPU).
CORE_SWITCH_S = 3e-6
#: Time shown for the InputOperator / OutputOperator rows of the per-layer profile;
#: it is part of the run's fixed cost (the law's run_s), so it does not lengthen the run (A46).
CPU_LAYER_S = 10e-6

#: masks of rknn_set_core_mask -> the cores they name (ALL = every core the SoC has)
_MASK_CORES: Dict[int, Tuple[int, ...]] = {
    abi.RKNN_NPU_CORE_0: (0,), abi.RKNN_NPU_CORE_1: (1,), abi.RKNN_NPU_CORE_2: (2,),
    abi.RKNN_NPU_CORE_0_1: (0, 1), abi.RKNN_NPU_CORE_0_1_2: (0, 1, 2),
}
# the last stretch of a wait is spun rather than slept: sleep() overshoots by ~0.05-0.1 ms
_SPIN_S = 0.2e-3


def soc_npu(soc: str) -> SocNpu:
    """The NPU of ``soc`` (ValueError naming the known SoCs otherwise)."""
    name = SOC_ALIASES.get(soc.lower(), soc.lower())
    if name not in SOCS:
        raise ValueError(f"the simulator does not know SoC {soc!r}; known: {', '.join(SOCS)}")
    return SOCS[name]


def is_split(op: str) -> bool:
    """Whether a multi-core mask splits layers of op type ``op`` over its cores."""
    return op in SPLIT_OPS


def split_speedup(n_cores: int) -> float:
    """How much faster a split layer runs on ``n_cores`` cores than on one."""
    return 1.0 + SPLIT_GAIN_PER_EXTRA_CORE * (n_cores - 1)


@dataclass(frozen=True)
class LayerTime:
    """One layer of a modeled run.  ``id``: the compiler's layer id (the
    runtime's profile numbers it id + 1); ``target``: "NPU" or "CPU";
    ``cores``: the NPU cores it occupies (none for a CPU layer); ``split``: run
    on several cores at once; ``seconds``: its modeled time; ``counted``: whether
    it adds to the run (the Input/OutputOperator rows show CPU_LAYER_S, which is
    inside the run's fixed cost)."""
    id: int
    op: str
    target: str
    cores: Tuple[int, ...]
    split: bool
    seconds: float
    counted: bool = True


def cores_of_mask(core_mask: int, soc: str) -> Tuple[int, ...]:
    """The cores a run with ``core_mask`` uses on ``soc`` (AUTO: one core,
    modeled as core 0; ALL: every core).  ValueError for a mask the SoC lacks."""
    n_cores = soc_npu(soc).cores
    if core_mask == abi.RKNN_NPU_CORE_AUTO:
        return (0,)
    if core_mask == abi.RKNN_NPU_CORE_ALL:
        return tuple(range(n_cores))
    cores = _MASK_CORES.get(core_mask)
    if cores is None or max(cores) >= n_cores:
        raise ValueError(f"core mask {abi.CORE_MASK_NAMES.get(core_mask, hex(core_mask))}: "
                         f"the {soc} has {n_cores} NPU core(s)")
    return cores


def layer_times_on(layers: Sequence[Mapping[str, Any]], soc: str,
                   cores: Tuple[int, ...]) -> List[LayerTime]:
    """Modeled time of each layer of a report's layer table, run on ``cores``."""
    law = timing_law.law_for(soc)
    n = len(cores)
    times = []
    for layer in layers:
        op = layer["op"]
        seconds = timing_law.layer_seconds(layer, law)
        if layer["target"] != "NPU":
            io = op in timing_law.IO_OPS
            times.append(LayerTime(layer["id"], op, layer["target"], (), False,
                                   CPU_LAYER_S if io else seconds, counted=not io))
            continue
        split = n > 1 and is_split(op)
        if split:
            seconds = seconds / split_speedup(n) + CORE_SWITCH_S
        times.append(LayerTime(layer["id"], op, "NPU", cores if split else cores[:1], split, seconds))
    return times


def layer_times(report: Any, soc: str, core_mask: int = abi.RKNN_NPU_CORE_0) -> List[LayerTime]:
    """Modeled time of each layer of ``report`` (a rknnlab.models.CompilerReport)
    in a run on ``soc`` with ``core_mask``."""
    return layer_times_on(report.layers, soc, cores_of_mask(core_mask, soc))


def run_seconds_of(times: Sequence[LayerTime], soc: str) -> float:
    """The run these layer times make on ``soc``: its layers (NPU, and CPU hand-overs) plus
    the SoC's fixed cost per run (the Input/OutputOperator rows are inside it)."""
    return math.fsum(t.seconds for t in times if t.counted) + timing_law.law_for(soc).run_s


def wait_until(deadline: float) -> None:
    """Block until time.perf_counter() reaches ``deadline``: sleep for the bulk,
    then busy-wait for the last fraction of a millisecond.  The busy wait does
    not yield: sched_yield would hand the core to any busy process (and come
    back milliseconds late on a loaded machine), sleep(0) costs the timer slack."""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return
        if remaining > _SPIN_S:
            time.sleep(remaining - _SPIN_S)


@dataclass(frozen=True)
class RunSlot:
    """One run's hold on the NPU: its cores, modeled duration and start (perf_counter)."""
    cores: Tuple[int, ...]
    seconds: float
    start: float


class Npu:
    """The NPU of one SoC as the whole process sees it."""

    def __init__(self, soc: str) -> None:
        self.soc = soc
        self.n_cores = soc_npu(soc).cores
        self._core_locks = [threading.Lock() for _ in range(self.n_cores)]
        # runs holding or waiting for each core, so AUTO can pick the least busy
        self._claims = [0] * self.n_cores
        self._claims_lock = threading.Lock()

    def mask_valid(self, core_mask: int) -> bool:
        """Whether this SoC has the cores ``core_mask`` names."""
        if core_mask in (abi.RKNN_NPU_CORE_AUTO, abi.RKNN_NPU_CORE_ALL):
            return True
        cores = _MASK_CORES.get(core_mask)
        return cores is not None and max(cores) < self.n_cores

    def cores_of(self, core_mask: int) -> Tuple[int, ...]:
        """The cores a fixed mask names (AUTO is resolved per run by :meth:`occupy`)."""
        if core_mask == abi.RKNN_NPU_CORE_ALL:
            return tuple(range(self.n_cores))
        return _MASK_CORES[core_mask]

    @contextmanager
    def occupy(self, core_mask: int, seconds_on: Callable[[Tuple[int, ...]], float],
               since: float) -> Iterator[RunSlot]:
        """Hold the cores of ``core_mask`` for one run asked for at ``since``
        (perf_counter), lasting ``seconds_on(cores)``: waits for the cores to be free (queueing
        behind other contexts' runs), yields the slot, and on leaving blocks
        until the modeled time has passed since the run started, which is
        ``since`` if the cores were free (the runtime's own overhead is part of
        the modeled time), else when they became free.  Work done inside the
        block overlaps the modeled time; work longer than it makes the run
        that long."""
        with self._claims_lock:
            if core_mask == abi.RKNN_NPU_CORE_AUTO:
                cores: Tuple[int, ...] = (min(range(self.n_cores), key=self._claims.__getitem__),)
            else:
                cores = self.cores_of(core_mask)
            for core in cores:
                self._claims[core] += 1
        held: List[int] = []
        queued = False
        try:
            for core in cores:  # always in ascending order: no deadlock between masks
                lock = self._core_locks[core]
                if not lock.acquire(blocking=False):
                    lock.acquire()
                    queued = True
                held.append(core)
            start = time.perf_counter() if queued else since
            slot = RunSlot(cores, seconds_on(cores), start)
            yield slot
            wait_until(slot.start + slot.seconds)
        finally:
            for core in held:
                self._core_locks[core].release()
            with self._claims_lock:
                for core in cores:
                    self._claims[core] -= 1


_npus: Dict[str, Npu] = {}
_npus_lock = threading.Lock()


def npu_for(soc: str) -> Npu:
    """The process-wide NPU of ``soc``: every SimRuntime of that SoC shares it."""
    with _npus_lock:
        if soc not in _npus:
            _npus[soc] = Npu(soc)
        return _npus[soc]
