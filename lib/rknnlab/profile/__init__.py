"""Where the time and the bytes of a frame go (Chapter 3, Bottlenecks): measured where
this machine can measure it, modeled (and labelled so) where it cannot.

Every table these functions return (a pandas DataFrame) says in ``attrs["source"]``
where its numbers come from: a board's name, "simulated RK3588: ... measured on this machine's
CPU, NPU modeled", a compiler report, or "MODELED".  Timings are medians with their
spread (q1/q3: the middle half of the repeats); a verdict carries its interval.

==============================  =====================================================
per-layer profile               :func:`perf_detail` (RKNN_QUERY_PERF_DETAIL's text),
                                :func:`parse_perf_detail`, :func:`op_ranking`,
                                :func:`perf_table` (both in one step)
compiler report, no run         :func:`layer_table` (cycles, bytes read, MACs, bound),
                                :func:`bound_counts`, :func:`traffic` (bytes per frame,
                                a floor at the DDR peak, an estimate
                                at a board trace's rate); constants with sources
                                in rknnlab.profile.report
phases of a frame               :func:`phases`, :func:`published_phases` (two
                                public RK3588 splits),
                                :func:`frame_inputs`, the post-processes :func:`top5`
                                and :func:`yolov5_decode`
CPU costs                       :func:`layout_cost`, :func:`dequant_cost`,
                                :func:`copy_cost` (measured); :func:`sync_cost`,
                                :func:`uncached_read` (MODELED); :func:`cpu_costs`
heap fragmentation (glibc)      :func:`fragmentation`, :func:`retained`
more NPU cores                  :func:`multicore`, :func:`split_share`
the simulator's timing          :func:`timing_check` (modeled vs published FPS),
                                :func:`published_fps` (the model zoo's table)
rknn-toolkit-lite2 (RKNNLite)    :func:`lite_phases` (the calls of inference() and
                                the class's own work around them),
                                :func:`published_lite_growth` (airockchip/rknn-toolkit2#42)
any table as text               :func:`show` (units in the cells, the source under it)
==============================  =====================================================

Figures of these tables: rknnlab.plot.frame_phases, layer_profile, traffic, multicore,
fragmentation, cpu_costs.
"""
from .cpu import (copy_cost, cpu_costs, dequant_cost, dequantize, layout_cost, nc1hwc2_to_nchw,
                  sync_cost, to_nc1hwc2, uncached_read)
from .heap import PATTERNS, fragmentation, retained
from .lite import lite_phases, published_lite_growth
from .cores import multicore, split_share
from .perf_text import op_ranking, parse_perf_detail, perf_detail, perf_table
from .phase_timing import PHASES, frame_inputs, phases, published_phases, top5, yolov5_decode
from .report import (DDR_PEAK_BYTES_PER_S, READ_RATE_ESTIMATE_BYTES_PER_S, bound_counts, layer_table,
                     traffic)
from .show import show
from .timing import published_fps, timing_check

__all__ = [
    "perf_detail", "parse_perf_detail", "op_ranking", "perf_table",
    "layer_table", "bound_counts", "traffic", "DDR_PEAK_BYTES_PER_S", "READ_RATE_ESTIMATE_BYTES_PER_S",
    "phases", "published_phases", "frame_inputs", "top5", "yolov5_decode", "PHASES",
    "layout_cost", "dequant_cost", "copy_cost", "sync_cost", "uncached_read", "cpu_costs",
    "to_nc1hwc2", "nc1hwc2_to_nchw", "dequantize",
    "fragmentation", "retained", "PATTERNS",
    "multicore", "split_share", "timing_check", "published_fps", "show",
    "lite_phases", "published_lite_growth",
]
