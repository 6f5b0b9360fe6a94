"""Whether a caller's weight memory still holds the weights (ASSUMPTIONS A58).

With RKNN_FLAG_MEM_ALLOC_OUTSIDE the NPU reads the weights from the caller's
weight mem at every run. A mem that something else writes into (the same mem
given as internal memory too, or an internal view overlapping it: every run
writes its intermediate tensors there) feeds the NPU damaged weights, and the
outputs mean nothing.

The simulator does not compute with the weight bytes, so it keeps a sample of
them when rknn_set_weight_mem writes them and compares it at the start and the
end of each run. The sample is cheap (a fixed number of evenly spaced bytes, some
tens of microseconds per check even for 40 MB of weights) and dense enough that any
overwritten run of more than ``nbytes / SAMPLES`` bytes changes it.
"""
from __future__ import annotations

import zlib
from typing import List, Sequence

import numpy as np

#: bytes sampled from the weights (evenly spaced, first and last included)
SAMPLES = 16384


class WeightPrint:
    """A sample of the weight bytes as rknn_set_weight_mem wrote them."""

    def __init__(self, weights: np.ndarray) -> None:
        self.nbytes = weights.size
        self._positions = np.unique(np.linspace(0, max(self.nbytes - 1, 0), min(self.nbytes, SAMPLES),
                                                dtype=np.int64))
        self._values = weights[self._positions].copy()

    def sample(self, weights: np.ndarray) -> np.ndarray:
        """The sampled bytes of ``weights`` (the same mem, seen now)."""
        return weights[self._positions]

    def changed(self, weights: np.ndarray) -> bool:
        """Whether any sampled byte differs from what set_weight_mem wrote."""
        return not np.array_equal(self.sample(weights), self._values)

    def check(self, weights: np.ndarray) -> "WeightCheck":
        """Start of a run: the weights as they are now, checked again at its end."""
        return WeightCheck(self, weights, self.changed(weights))

    def damaged_outputs(self, weights: np.ndarray, sizes: Sequence[int]) -> List[np.ndarray]:
        """Native output bytes of a run on damaged weights: deterministic for the same
        damage (seeded from the sampled bytes as they are now) and meaningless."""
        seed = zlib.crc32(self.sample(weights).tobytes())
        rng = np.random.default_rng(seed)
        return [rng.integers(0, 256, size=size, dtype=np.uint8) for size in sizes]


class WeightCheck:
    """One run's check of the weight mem: damaged at its start, or by its end."""

    def __init__(self, written: WeightPrint, weights: np.ndarray, damaged_before: bool) -> None:
        self.written, self.weights, self.damaged_before = written, weights, damaged_before

    def damaged(self) -> bool:
        return self.damaged_before or self.written.changed(self.weights)

    def outputs(self, sizes: Sequence[int]) -> List[np.ndarray]:
        """What the run's outputs become on damaged weights."""
        return self.written.damaged_outputs(self.weights, sizes)
