"""Where NPU memory goes and how to allocate it (Chapter 5, Allocation strategy):
measured on the runtime passed in (default: rknnlab.open_runtime("sim"), the simulated
RK3588; on a board the native runtime), MODELED (and labelled so) where nothing can
be measured.

Every table is a pandas DataFrame whose ``attrs["source"]`` says where its numbers come
from; print it with rknnlab.profile.show.  A verdict (``attrs["verdict"]``) says
"cannot tell" when the measurement does not settle it.

==============================  =====================================================
preallocation                   :func:`prealloc_vs_per_frame` (the recipe's loop, io
                                mems made every frame, create once / bind once / run
                                many)
one internal buffer, N models   :func:`shared_internal` (separate, INTERNAL_ALLOC_OUTSIDE,
                                MEM_ALLOC_OUTSIDE as the official demo),
                                :func:`parallel_corruption` and
                                :func:`corruption_verdict` (the same buffer, two runs
                                at once), :class:`Ledger` (what a group of contexts
                                really holds)
N pipelines of one model        :func:`pipelines_memory` (rknn_init each, dup_context,
                                shared internal memory), :func:`lite_vs_dup` (N
                                RKNNLite objects against init + dup_context)
dynamic shapes                  :func:`shape_sweep` (largest io once, bound again per
                                shape), :func:`input_shapes`, :func:`set_shape`
RK3588's NPU SRAM               :func:`sram_fit` (measured from the runtime's table, or
                                MODELED for a budget), :func:`sram_hits` (parse an
                                RKNN_LOG_LEVEL=3 table), :func:`sram_log`,
                                :func:`sram_effect` (run time without / with
                                ENABLE_SRAM), :func:`try_alloc_sram` (create_mem2
                                spills to DDR), :func:`sram_usage`
                                (/sys/kernel/debug/rknpu/mm), :func:`free_sram`,
                                :func:`parse_sram_bitmap`, :func:`show_sram` (a table
                                as a few lines)
the 4 GiB IOMMU domain          :func:`iommu_budget` (compiler reports, no run)
cacheable or not                :func:`cache_choice` (cached read measured; uncached
                                read and rknn_mem_sync MODELED, measured on a board),
                                :func:`cache_choices` (several access patterns, one
                                table)
==============================  =====================================================

Figures: rknnlab.plot.alloc_loops, alloc_sharing, alloc_pipelines, alloc_shapes,
alloc_sram, alloc_iommu, alloc_cache_choice.
"""
from .budget import IOMMU_DOMAIN_BYTES, cache_choice, cache_choices, iommu_budget
from .lite_pool import LITE_WAYS, lite_vs_dup
from .prealloc import STRATEGIES, prealloc_vs_per_frame
from .shapes import input_shapes, set_shape, shape_sweep
from .sharing import (ATTEMPTS_PER_RUN, PIPELINES, SETUPS, Ledger, corruption_verdict, parallel_corruption,
                      pipelines_memory, shared_internal)
from .sram import (RK3588_SRAM_BYTES, free_sram, parse_sram_bitmap, show_sram, sram_effect, sram_fit, sram_hits,
                   sram_log, sram_usage, try_alloc_sram)

__all__ = [
    "prealloc_vs_per_frame", "STRATEGIES",
    "shared_internal", "SETUPS", "parallel_corruption", "corruption_verdict", "ATTEMPTS_PER_RUN", "Ledger",
    "pipelines_memory", "PIPELINES", "lite_vs_dup", "LITE_WAYS",
    "shape_sweep", "input_shapes", "set_shape",
    "sram_fit", "sram_hits", "sram_log", "sram_effect", "try_alloc_sram", "sram_usage", "free_sram",
    "parse_sram_bitmap", "show_sram", "RK3588_SRAM_BYTES",
    "iommu_budget", "IOMMU_DOMAIN_BYTES", "cache_choice", "cache_choices",
]
