"""What rknn-toolkit-lite2's ``RKNNLite`` adds around the runtime's calls (chapters 3 and 4).

``RKNNLite.inference()`` is one Python call, but it stands for the general API
(rknn_inputs_set, rknn_run, rknn_outputs_get, rknn_outputs_release) plus the
class's own work around them: copying each input into a staging buffer, and
copying each float32 output into a new array unless ``reuse_outputs=True``
(rknnlab.sim ASSUMPTIONS A66-A68).  The harness times the block "inference"
and the runtime calls inside it, so :func:`lite_phases` can split an
iteration into the calls and the rest.  On the simulator the rest is the
simulator's model of the wheel, in Python; on a board it is the wheel's own
compiled code.

:func:`published_lite_growth` holds the one public measurement of RKNNLite's
memory growth (a user's, airockchip/rknn-toolkit2#42), which the simulator
does not reproduce (A71).
"""
from __future__ import annotations

from typing import Any

import numpy as np

#: the runtime calls one RKNNLite.inference() makes, in order (A66)
LITE_CALLS = ("inputs_set", "run", "outputs_get", "outputs_release")
#: the column for the class's own work: the "inference" block less the calls inside it
OUTSIDE = "outside_the_calls_ms"

#: the public measurement (airockchip/rknn-toolkit2#42): rknn-toolkit-lite2 2.3.2 on an RK3588, yolov8n
GROWTH_SOURCE = "published by a user, not simulated: airockchip/rknn-toolkit2#42 (lite2 2.3.2, RK3588, yolov8n)"
#: RSS at the start and the end of the run without gc.collect(), in MB, and its calls
RSS_START_MB, RSS_END_MB, CALLS_WITHOUT_GC = 80.6, 661.5, 13_690
#: the run with gc.collect() every 5 calls: its calls, and its RSS as published (a range, no trend)
CALLS_GC_EVERY_5, RSS_LOW_MB_GC_EVERY_5, RSS_HIGH_MB_GC_EVERY_5 = 9_733, 65.0, 87.0
#: growth per call, in kB, as published: without gc.collect(), and with gc.collect() every 5 calls
KB_PER_CALL_WITHOUT_GC, KB_PER_CALL_GC_EVERY_5 = 42.43, 0.158


def lite_phases(result: Any) -> Any:
    """Variant x phase: the median over measured iterations of the ms each iteration spent in
    rknn_inputs_set, rknn_run, and rknn_outputs_get + rknn_outputs_release (``outputs_get_ms``),
    and, for a variant that times an "inference" block (an RKNNLite variant), the block's time
    less the calls inside it (``outside_the_calls_ms``: the class's own copies and checks; NaN
    for a variant without the block, and on a board, where the wheel's calls are not recorded
    and only the whole block is timed).  ``gc_collect_ms``: the median time of a timed
    gc.collect() block, when some variant has one.  ``attrs["source"]``: the result's source."""
    import pandas as pd
    calls = result.calls
    measured = calls[calls["stage"] == "measure"]
    per_iteration = (measured.groupby(["variant", "iteration", "function"], observed=True)["duration_us"]
                     .sum().unstack("function"))
    for column in (*LITE_CALLS, "inference", "gc_collect"):
        if column not in per_iteration:
            per_iteration[column] = np.nan
    # min_count: on a board the wheel calls librknnrt itself, so no call is recorded inside the
    # block and the class's own work cannot be told from the NPU's (NaN, not the whole call)
    inside = per_iteration[list(LITE_CALLS)].sum(axis=1, min_count=1)
    table = pd.DataFrame({
        "inputs_set_ms": per_iteration["inputs_set"],
        "run_ms": per_iteration["run"],
        "outputs_get_ms": per_iteration["outputs_get"].fillna(0.0) + per_iteration["outputs_release"].fillna(0.0),
        OUTSIDE: per_iteration["inference"] - inside,
        "gc_collect_ms": per_iteration["gc_collect"],
    }) / 1e3
    medians = table.groupby(level="variant", observed=True).median()
    order = [v for v in result.variants if v in medians.index] if hasattr(result, "variants") else None
    medians = medians.reindex(order) if order else medians
    medians = medians.dropna(axis=1, how="all")
    medians.attrs["source"] = result.source
    return medians


def published_lite_growth() -> Any:
    """The published RSS growth of RKNNLite.inference() (airockchip/rknn-toolkit2#42), one
    row per way the user ran it: ``kb_per_call`` and ``calls`` as published, and what the
    growth gives over an hour at 30 calls per second (``mb_per_hour_at_30_fps``, computed
    here).  ``rss_start_mb``/``rss_end_mb``: the run without gc.collect(), start and end;
    ``rss_low_mb``/``rss_high_mb``: the run with gc.collect() every 5 calls, whose RSS the
    user gives as a range with no trend; ``rss``: each run's RSS in the thread's words.  Not
    simulated: the simulator leaves no reference cycle (ASSUMPTIONS A71)."""
    import pandas as pd
    rows = [{"way": "inference() only", "kb_per_call": KB_PER_CALL_WITHOUT_GC, "calls": CALLS_WITHOUT_GC,
             "rss_start_mb": RSS_START_MB, "rss_end_mb": RSS_END_MB, "rss_low_mb": np.nan,
             "rss_high_mb": np.nan, "rss": f"{RSS_START_MB:g} -> {RSS_END_MB:g} MB"},
            {"way": "gc.collect() every 5 calls", "kb_per_call": KB_PER_CALL_GC_EVERY_5,
             "calls": CALLS_GC_EVERY_5, "rss_start_mb": np.nan, "rss_end_mb": np.nan,
             "rss_low_mb": RSS_LOW_MB_GC_EVERY_5, "rss_high_mb": RSS_HIGH_MB_GC_EVERY_5,
             "rss": f"{RSS_LOW_MB_GC_EVERY_5:g}-{RSS_HIGH_MB_GC_EVERY_5:g} MB, sawtooth, no trend"}]
    table = pd.DataFrame(rows).set_index("way")
    table["mb_per_hour_at_30_fps"] = table["kb_per_call"] * 30 * 3600 / 1e3
    table.attrs["source"] = GROWTH_SOURCE
    return table
