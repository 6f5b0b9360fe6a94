"""What a run keeps in a caller's internal memory while the NPU works (ASSUMPTIONS A28).

The compiler's plan (the report's feature_tensors) places every intermediate
tensor of a run in the internal buffer and reserves a slot for the model's
input tensor too (at its start in every course model).  A run needs those bytes from its first
layer to its last, so two contexts sharing one internal buffer must not run at
the same time: the documented pattern is for models that run one after
another (API reference V2.3.2 p.18-19; User Guide V1.5.2).

The simulator does not compute activations, so it carries that state in a
stand-in (on a board the input stays in its own io buffer, and what collides is
the intermediate tensors):

- at the start of the modeled NPU time, the run writes its intermediate
  tensors (the whole plan, [0, total_internal_size), with one byte derived
  from its inputs) and then its native inputs at their plan offsets;
- at the end of the modeled NPU time, the outputs are computed from the input
  bytes found there: unchanged, they are the usual outputs; overwritten by
  another run meanwhile, they are the outputs of what that run left there;
- then the run's later layers write over its input's place in the plan (later
  tensors reuse those offsets in every course model's plan); only that part is
  written again, so the end of a run costs little beyond the modeled time.

Runs on one core queue, so they never overlap; runs on different cores (fixed
masks, or AUTO picking idle cores) overlap in time and corrupt each other.
Only a caller's internal mem (rknn_set_internal_mem) is modeled this way: a
buffer the runtime allocated is private to its context, so nobody else can
see or disturb it.
"""
from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from .. import models
from .memory import address_of, same_bytes


def input_regions(report: models.CompilerReport, input_names: Sequence[str]) -> List[Optional[Tuple[int, int]]]:
    """(start, size) of each input tensor in the compiler's internal plan (the first
    feature_tensors row of that name), or None where the plan does not list it."""
    rows = {}
    for row in report.data.get("feature_tensors") or []:
        rows.setdefault(row["tensor"], (row["start"], row["size"]))
    return [rows.get(name) for name in input_names]


def _fill_byte(native_inputs: Sequence[np.ndarray]) -> int:
    """The byte a run's intermediate tensors are modeled with: derived from its inputs, so
    runs on different inputs leave different bytes (never the zeros of a fresh buffer)."""
    checksum = 0
    for data in native_inputs:
        checksum = zlib.crc32(data, checksum)
    return (checksum % 255) + 1


#: one run writes or reads a plan at a time: on a board the NPU writes a tensor in one go, so
#: a CPU thread stalled half-way through the simulator's write must not let another run in
_PLAN_WRITES = threading.Lock()


@dataclass
class InternalState:
    """One run's hold on a caller's internal buffer (``plan``: its first
    total_internal_size bytes)."""
    plan: np.ndarray
    regions: List[Optional[Tuple[int, int]]]
    native_inputs: List[np.ndarray]
    written: List[Optional[np.ndarray]]
    fill: int

    @classmethod
    def enter(cls, plan: np.ndarray, regions: List[Optional[Tuple[int, int]]],
              native_inputs: Sequence[np.ndarray]) -> "InternalState":
        """Start of the modeled NPU time: write the intermediate tensors, then the inputs."""
        fill = _fill_byte(native_inputs)
        written: List[Optional[np.ndarray]] = []
        with _PLAN_WRITES:
            plan[:] = fill
            for region, data in zip(regions, native_inputs):
                if region is None:
                    written.append(None)
                    continue
                start, size = region
                n = min(size, data.size, plan.size - start)
                plan[start:start + n] = data[:n]
                written.append(np.array(data[:n], copy=True))
        return cls(plan, list(regions), list(native_inputs), written, fill)

    def leave(self, results: List[np.ndarray],
              compute: Callable[[List[np.ndarray]], List[np.ndarray]]) -> Tuple[List[np.ndarray], bool]:
        """End of the modeled NPU time: (the outputs of the inputs found in the plan,
        whether another run had overwritten them); then later layers write over the
        inputs' places in the plan."""
        found: List[np.ndarray] = []
        corrupted = False
        with _PLAN_WRITES:
            for region, data, written in zip(self.regions, self.native_inputs, self.written):
                if region is None or written is None:
                    found.append(data)
                    continue
                start = region[0]
                there = self.plan[start:start + written.size]
                if same_bytes(address_of(there), address_of(written), written.size):
                    found.append(data)
                    continue
                corrupted = True
                changed = np.array(data, copy=True)
                changed[:written.size] = there
                found.append(changed)
        if corrupted:
            results = compute(found)
        with _PLAN_WRITES:
            for region, written in zip(self.regions, self.written):
                if region is not None and written is not None:
                    self.plan[region[0]:region[0] + written.size] = self.fill
        return results, corrupted
