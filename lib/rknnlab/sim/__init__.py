"""The simulator backend: the RKNN runtime with real CPU-side memory and a modeled NPU.

    from rknnlab.sim import SimRuntime, ASSUMPTIONS
    rt = SimRuntime("rk3588")          # or rknnlab.open_runtime("sim")

Rule: everything on the CPU side is real, only the NPU is modeled.

- Real memory.  What librknnrt mallocs comes from glibc's heap (the model copy,
  rknn_outputs_get buffers with is_prealloc=0, rknn_tensor_mem structs); DMA
  buffers (weights, internal, io, create_mem) are memfds mapped with mmap, so
  ``fd`` is a real descriptor and create_mem_from_fd really shares pages.
  Pointers are real addresses; rknnlab.rknn.buffers views work on them.
- Real work.  Input conversion (type, layout, mean/std normalisation,
  quantization), output conversion (NC1HWC2 -> NCHW, dequantization) and every
  copy are numpy work on those bytes.
- Modeled NPU.  rknn_run blocks for a time computed from the compiler report
  (rknnlab.sim.npu), on a process-wide NPU with the SoC's cores.  Output values
  come from the model's fp32 ONNX twin run with onnxruntime (mobilenet_v2, yolov5n,
  digits_cnn, ppocr_det), or from a deterministic stand-in that changes with the input
  but means nothing (yolov5s, yolov5s_relu, yolov5m, resnet50, and the builds at
  other sizes but mobilenet_v2_dynamic): see rknnlab.sim.outputs and A61.

Modeled as well (each a listed assumption below where the documents are silent):
- Memory from outside: RKNN_FLAG_MEM_ALLOC_OUTSIDE (weights, internal and every
  io tensor set by the caller before rknn_run) and INTERNAL_ALLOC_OUTSIDE;
  the NPU reads the weights from the caller's weight mem (overwritten weights,
  wrong outputs); a context takes only its own mems or views (or ALLOC_NO_CONTEXT
  ones); rknn_create_mem_from_phys inside a mem's made-up NPU address range.
- Shared internal memory: a run keeps its state in a caller's internal mem
  from start to end (rknnlab.sim.internal), so two contexts sharing one whose
  runs overlap on different cores get wrong outputs; one after another, right.
- RK3588 NPU SRAM (rknnlab.sim.sram): RKNN_FLAG_ENABLE_SRAM and
  RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM against a 956 KiB budget in 4 KiB pages, the
  /sys/kernel/debug/rknpu/mm bitmap (SimRuntime.sram_bitmap), the
  RKNN_LOG_LEVEL=3 SramHit table (SimRuntime.sram_log) and the DDR time hits save.
- Dynamic shapes (a model built with dynamic_input): RKNN_QUERY_INPUT_DYNAMIC_RANGE,
  rknn_set_input_shapes, the CURRENT_* attrs, each shape's own plan and time.
- Mems remember CACHEABLE / NON_CACHEABLE; memory stays coherent (A11) and the
  CPU cost of uncached memory is modeled in rknnlab.profile.cpu, except for a
  context made with a DISABLE_FLUSH flag: its cacheable bound mems go stale
  (rknn_mem_sync FROM_DEVICE is an invalidate, TO_DEVICE a clean:
  rknnlab.sim.cache, A60).

What the simulator does not reproduce (limitations, not claims about a board):
the onnxruntime session and the small output cache add to the process's RSS
at the first run of a model (take memory baselines after one run; in a C program
on the simulator's librknnrt.so, rknnlab.sim.capi loads and runs the session once
in rknn_init, prints what that cost, and runs one inference at a time, so only the
cache, up to 4 inputs' outputs, grows in the first frames); a run
whose values take longer to compute than the modeled time (an uncached input
of a twin model) lasts as long as computing, unless values are replayed (below); asynchronous runs,
fences and GPU fallback are not modeled (their flags and queries are refused
with an error saying so, never ignored), nor are weights in SRAM (the older
SRAM note's environment variables).
RKNN_QUERY_PERF_DETAIL (with RKNN_FLAG_COLLECT_PERF_MASK) answers the runtime's
per-layer text from the compiler report and the modeled layer times
(rknnlab.sim.perf).

Modules: memory (libc heap, memfd DMA buffers), layout (formats, quantization,
normalisation), npu (timing per layer, cores), perf (the PERF_DETAIL text),
outputs (values), model (course models by sha256), mems (rknn_tensor_mem),
internal (a run's state in a caller's internal mem), weightprint (whether a
caller's weight mem still holds the weights), cache (stale caches under the
DISABLE_FLUSH flags), sram (NPU SRAM), shapes
(dynamic-shape dims), context (per-context state), runtime (the API).

Timing runs: ``with rknnlab.sim.values_replayed(): ...`` makes every twin
model write the outputs it computed last instead of running onnxruntime
(process-wide, every thread; blocks nest).  An onnxruntime inference on the
PC can last longer than the modeled NPU run (ppocr_det at 480x480: 27 ms
or more on two threads, against 7 ms modeled on one rk3588 core), and it
would then set the run's wall time.  Inside the block rknn_run lasts its
modeled time, so a pipeline's frame rate measures the modeled NPU and the
pipeline's own CPU work.  Only the output values change (they are the last
computed frame's, not this frame's): the modeled times, the runtime's
allocations (heap, DMA account) and every API call stay as they are.  This
is a tool for measuring, not a claim about a board (no assumption): on a
board the values are always real.

``modeled_run_ms(model, soc, core_mask)`` gives a run's modeled time from the
report alone: the time rknn_run blocks for (and RKNN_QUERY_PERF_RUN reports).

Assumptions: what the simulator assumes about the real runtime where the
public documentation is silent; each says how a board owner checks it.
The same list is ``ASSUMPTIONS`` (id, assumption, check), for notebooks.
"""
from __future__ import annotations

import html
from typing import List, Sequence, Tuple

from .. import models
from ..rknn import abi
from . import npu
from .outputs import values_replayed
from .runtime import SimRuntime

#: (id, what the simulator assumes, how a board owner checks it)
ASSUMPTIONS: List[Tuple[str, str, str]] = [
    ("A1", "DMA buffers (weights, internal, io, create_mem) get all their pages when they are "
           "allocated, not when first written: MemFree falls at rknn_init / rknn_create_mem.",
     "read MemFree in /proc/meminfo before and after rknn_create_mem(ctx, 64 MB) without writing "
     "to it; it should fall by about 64 MB."),
    ("A2", "Mapped DMA buffers count in the process's RSS (here as RssShmem, being memfds).",
     "compare VmRSS, RssFile and RssShmem in /proc/self/status before and after "
     "rknn_create_mem(ctx, 64 MB) plus writing every byte through virt_addr."),
    ("A3", "rknn_outputs_get with is_prealloc=0 mallocs a new buffer of exactly the output's size "
           "on every call; rknn_outputs_release frees it.",
     "run 1,000 gets without release and watch VmRSS (grows by about 1,000 x the output size) "
     "and glibc mallinfo2().uordblks; with release it stays flat."),
    ("A4", "Without RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, rknn_init keeps its own malloc'd copy of the "
           "whole .rknn file for the context's lifetime.",
     "mallinfo2() uordblks + hblkhd (rknnlab.probe.Heap; glibc serves a block this large with "
     "mmap, which mallinfo2 counts in hblkhd, not uordblks), or VmRSS, just before and after "
     "rknn_init from a buffer: it grows by about the file size and falls back at rknn_destroy."),
    ("A5", "With RKNN_FLAG_MODEL_BUFFER_ZERO_COPY the NPU reads the weights in place from the "
           "model buffer: no weight buffer is allocated and no model copy is kept.",
     "RKNN_QUERY_MEM_SIZE total_dma_allocated_size after rknn_init with and without the flag: "
     "they differ by about total_weight_size."),
    ("A6", "rknn_destroy frees the outputs_get buffers that were never released.",
     "1,000 gets without release, then rknn_destroy: VmRSS / mallinfo2 drop back."),
    ("A7", "rknn_destroy also frees the mems created with that context and not yet destroyed; "
           "rknn_destroy_mem with the destroyed context then fails (RKNN_ERR_CTX_INVALID).",
     "rknn_create_mem(ctx, 64 MB), rknn_destroy(ctx) without rknn_destroy_mem: does MemFree "
     "come back?"),
    ("A8", "rknn_create_mem_from_fd maps the fd again (a new virt_addr, the same pages); size "
           "counts from the start of the fd's buffer and the tensor starts offset bytes in, so "
           "size - offset bytes are usable; the virt argument is not used. The API reference "
           "V2.3.2 defines size only as the buffer's size, and a Rockchip call with an offset "
           "reads the other way: rknn_model_zoo's lite_transformer demo (examples/lite_transformer/"
           "cpp/rknpu2/lite_transformer.cc, commented out in init_lite_transformer_model) passes "
           "size = the tensor's own bytes (n_elems x sizeof(half)) with offset = EMBEDDING_DIM x "
           "sizeof(half).",
     "compare mem->virt_addr with the virt you passed; write through one mapping, read through "
     "the other; bind a from_fd mem with offset > 0 and see which size set_io_mem accepts: "
     "repeat lite_transformer's call (size = the tensor's own size, offset > 0) on a buffer of "
     "exactly offset + size bytes and on one of size bytes, and read each return code."),
    ("A9", "RKNN_QUERY_MEM_SIZE total_dma_allocated_size = this context's DMA buffers at their "
           "requested sizes: weights it allocated (not shared ones), internal (unless given from "
           "outside), io buffers, and create_mem/create_mem2 buffers made with this ctx; "
           "create_mem_from_fd and RKNN_MEM_FLAG_ALLOC_NO_CONTEXT mems count nowhere. Public "
           "evidence says a board allocates more: a public librknnrt 2.3.2 RK3588 allocation log "
           "(github wtwver/npu, ops_rknn/run_output.txt) shows a task buffer, register commands "
           "kept in a weight buffer larger than the compiler's weight size, and every buffer "
           "rounded up to 4 KiB; User Guide V2.3.0 section 9.1.1 lists register config as a part "
           "of runtime memory. On a board the total does hold more: airockchip/rknn-toolkit2#129 "
           "(librknnrt 2.1.0, RK3588) reports 22,917,120 B right after init against 13,459,840 B "
           "of weights + internal. The simulator has none of these extras (A36).",
     "query MEM_SIZE after rknn_init, after the first rknn_run, after rknn_create_mem(ctx, "
     "1 MiB + 1), after rknn_destroy_mem, after create_mem_from_fd, and for a SHARE_WEIGHT_MEM "
     "context; compare each total with the 'allocated memory ... aligned size' lines of the "
     "runtime's debug log (RKNN_LOG_LEVEL)."),
    ("A10", "rknn_init allocates one io DMA buffer per input and output (native size_with_stride); "
            "with RKNN_FLAG_MEM_ALLOC_OUTSIDE it allocates none (A51; only a binding in another "
            "layout gets a conversion buffer, at its first use). Public "
            "evidence says a board allocates them later: in a public librknnrt 2.3.2 RK3588 "
            "allocation log (github wtwver/npu, ops_rknn/run_output.txt), rknn_init allocates "
            "only the task, weight and internal buffers; the runtime's input and output buffers "
            "appear after the program's rknn_set_io_mem, around its first rknn_inputs_set and "
            "rknn_run (the log prints them after its rknn_run breakpoint). So right after "
            "rknn_init a board's DMA total probably holds no io buffers.",
     "query MEM_SIZE right after rknn_init and again after the first rknn_run: the difference "
     "against the sum of the native size_with_stride of all inputs and outputs (each rounded up "
     "to 4 KiB) says when the io buffers are allocated."),
    ("A11", "Memory is coherent unless a context was made with a DISABLE_FLUSH flag (A60): "
            "otherwise rknn_mem_sync only validates its arguments. Rockchip's sources do "
            "not settle when a board needs it: the comments of the init flags "
            "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE / _OUTPUT_MEM_CACHE imply that the runtime "
            "flushes inputs and invalidates outputs around rknn_run by default; the API reference "
            "says cacheable memory shared by the CPU and the NPU needs rknn_mem_sync; none of "
            "Rockchip's demos call it. rknn_mem_sync on a NON_CACHEABLE mem returns RKNN_SUCC "
            "here; Rockchip's rknpu kernel driver refuses to sync a buffer made without its "
            "cacheable flag (-EINVAL from its sync ioctl), and no document says what "
            "rknn_mem_sync returns then.",
     "init with RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE, write an input through a cacheable mem "
     "and run with and without RKNN_MEMORY_SYNC_TO_DEVICE; compare outputs (then the same "
     "without the flag); call rknn_mem_sync on a mem made with RKNN_FLAG_MEMORY_NON_CACHEABLE "
     "and read its return code (and dmesg)."),
    ("A12", "rknn_inputs_set takes UINT8, INT8, FLOAT32 and FLOAT16 inputs as raw values: it "
            "normalises them with the model's mean/std, quantizes with the native zp/scale "
            "(round half to even, saturating) and writes the native layout; INT8 is not taken as "
            "already quantized.",
     "feed one image as UINT8 and as INT8 (pixel values below 128) and compare the outputs; "
     "compare with pass_through bytes quantized by hand."),
    ("A13", "An input mem bound with set_io_mem holds INT8 values already quantized (its layout "
            "converted if the attr is not the native one); a UINT8 or float bound input holds raw "
            "values that the run normalises and quantizes.",
     "the model zoo's zero-copy demo sets type UINT8 on the native input attr and writes raw "
     "pixels: compare its outputs with inputs_set of the same image."),
    ("A14", "rknn_outputs_get with want_float=0 returns int8 in the plain attr's layout (NCHW for "
            "4-D outputs, converted from NC1HWC2 on the CPU); want_float=1 float32 in the same "
            "layout.",
     "for yolov5s, compare outputs_get(want_float=0) bytes with an output mem bound with the "
     "native attr."),
    ("A15", "Error codes where the docs give none: rknn_run before set_weight_mem / "
            "set_internal_mem with *_ALLOC_OUTSIDE -> PARAM_INVALID; any call but query/destroy "
            "on a COLLECT_MODEL_INFO_ONLY context -> CTX_INVALID (other queries PARAM_INVALID); "
            "outputs_get before any run -> OUTPUT_INVALID; an is_prealloc buffer too small -> "
            "PARAM_INVALID; bad arguments to the create_mem family -> PARAM_INVALID (the C "
            "function returns NULL); releasing a buffer outputs_get did not allocate -> "
            "PARAM_INVALID (ignored for is_prealloc=1).",
     "make each of these calls on a board and compare the return codes."),
    ("A16", "rknn_run without any rknn_inputs_set runs on whatever the input buffer holds (zeros "
            "at first) and does not fail.",
     "rknn_init then rknn_run without rknn_inputs_set: check the return code."),
    ("A17", "A multi-core mask (CORE_0_1, CORE_0_1_2) occupies all its cores for the run but splits "
            "only the layers whose op the API reference V2.3.2 (p.21) lists as having better "
            "acceleration (Conv, DepthwiseConvolution, Add, Concat, Relu, Clip, Relu6, "
            "ThresholdedRelu, Prelu, LeakyRelu; other ops fall back to core 0). The shipped compiler "
            "reports call them Conv, ConvClip, ConvRelu, ConvAdd, ConvAddRelu, ConvReluAdd, "
            "ConvLeakyRelu, ConvLeakyReluAdd, Relu, Add and Concat (rknnlab.sim.npu.SPLIT_OPS); "
            "every other layer runs on the mask's first core. "
            "The list does not say what happens to a Conv fused with an activation outside it; a "
            "public RK3588 yolov8n board trace (channyHuang.github.io, 'Push Yolov8n Pre-train Model "
            "To rk3588 (4)', librknnrt with RKNN_NPU_CORE_0_1_2) shows that ConvExSwish (a Conv fused "
            "with SiLU) stays on core 0: WorkLoad 100.0%/0.0%/0.0% and no faster than on one core "
            "(3921 vs 3973 us), while its Add and Concat rows show 33.3% on each core. So the "
            "simulator does not split ConvExSwish. Corroboration: airockchip/rknn-toolkit2#129 "
            "(rknn_benchmark of a yolov5s on an RK3588: three cores barely faster than one).",
     "init with RKNN_FLAG_COLLECT_PERF_MASK, set RKNN_NPU_CORE_0_1_2, run, and read the WorkLoad "
     "column of RKNN_QUERY_PERF_DETAIL for each op type (33.3%/33.3%/33.3% = split); compare "
     "the median rknn_run time with CORE_0 for yolov5s (SiLU) and yolov5s_relu."),
    ("A18", "RKNN_NPU_CORE_AUTO puts each run on the least busy core (fewest runs holding or "
            "waiting for it, lowest index on ties); runs on one core queue in wall time.",
     "two threads with AUTO vs two with CORE_0: compare throughput; watch "
     "/sys/kernel/debug/rknpu/load."),
    ("A19", "NPU clocks: rk3588 1 GHz (facts sheet); rk3576 1 GHz, rk3568/rk3566 0.9 GHz and "
            "rk3562 1 GHz with 1 core are guesses. rk3576 is sold as a 6 TOPS NPU with 2 cores "
            "(Rockchip's published specification as board makers and CNX Software reproduce it), "
            "but 1024 MACs per cycle and core (A47) at 1 GHz give 2 x 1024 x 2 ops x 1 GHz = about "
            "4 TOPS: its per-core rate or its clock is probably higher than modeled. The clocks "
            "only convert time into MacUsage (A47): the timing law (A20) fits each SoC's "
            "cycles per second itself.",
     "cat /sys/kernel/debug/rknpu/freq (root) or the NPU's devfreq cur_freq/max_freq; on an "
     "RK3576, read the MacUsage of a dense Conv row of RKNN_QUERY_PERF_DETAIL against "
     "MACs / (Time(us) x 1e-6 x 1024 x 1e9): a MacUsage below that (or that ratio above 100 %) "
     "means more MACs per cycle or a faster clock than modeled."),
    ("A20", "One single-core timing law per SoC, read from the compiler report alone "
            "(rknnlab.sim.timing_law): a layer with compiler cycles takes k x its NPU cycles / F, "
            "with k = 1 for a Conv, a per-SoC depthwise factor for a depthwise Conv and one SiLU "
            "factor for a Conv fused with SiLU (ConvExSwish: the compiler gives yolov5s and "
            "yolov5s_relu the same cycles, the zoo measures the SiLU network slower); a layer the "
            "compiler gives 0 cycles takes its RW bytes / B; a layer the runtime runs on the CPU "
            "between NPU layers takes c; a run adds a fixed cost b. F, B, c, b and the depthwise "
            "factor are fitted per SoC, the SiLU factor once, by non-negative least squares on the "
            "relative error against the RKNN model zoo's single-core INT8 FPS of seven networks "
            "(mobilenetv2-12, yolov5s_relu, yolov6n, yolov8n, yolox_s, RetinaFace_mobile320, "
            "deeplab-v3-plus-mobilenet-v2) on rk3588, rk3576, rk3566/68 and rk3562 "
            "(data/timing/zoo_fps.json). The networks are the course's builds of the published "
            "architectures with seeded-random weights (cycles do not depend on weight values); "
            "the zoo's own files may differ in details. Every calibration row is within 9 %; left "
            "out of the fit one at a time, the four detectors without depthwise layers stay within "
            "17 %, while the three networks with depthwise layers miss by up to 51 % (each has "
            "something no other calibration model has: deeplab's depthwise layers on 65 x 65 maps, "
            "RetinaFace's CPU layers on rk3568 and a 17 MB 0-cycle Concat on rk3588); the 15 % "
            "target is met by yolov8n and yolox_s only. Seven rows per SoC fit five coefficients, "
            "so the coefficients move between refits: the depthwise factor rests mostly on "
            "deeplab, the CPU hand-over is 0 on every SoC but rk3568 (and there only through "
            "RetinaFace), B is a fitted rate, not a bandwidth (on rk3576, 0-cycle layers are free), "
            "and the SiLU factor comes from yolov8n and yolox_s and overestimates the YOLOv5 family. "
            "A fit on the compiler's total cycles (DDR included) did worse. Rows the fit "
            "never saw: yolov5s (SiLU) +8 % to +18 %, yolov5n rk3588 +4 %, yolov5m rk3588 +29 %, "
            "ppocr_det (the zoo's ppocrv4_det) rk3588 -31 %, rk3576 -48 %, rk3568 -8 %, rk3562 "
            "-10 % (benchmarks/bench_timing_law.py prints every row). The fixed cost b is poorly "
            "identified (the smallest calibration network takes 2.1 ms): tiny models such as "
            "digits_cnn are modeled in tens of microseconds, which a board may not reach.",
     "median rknn_run wall time over 100 runs on the board vs RKNN_QUERY_PERF_RUN here."),
    ("A21", "RKNN_QUERY_PERF_RUN gives the modeled duration of the last run in microseconds "
            "(including the fixed overhead, excluding time queued behind other contexts).",
     "compare PERF_RUN with the wall time of rknn_run on an idle board."),
    ("A22", "RKNN_FLAG_PRIOR_HIGH/MEDIUM/LOW are accepted and not modeled: runs waiting for a "
            "core are served in whatever order the core's lock wakes them.",
     "two contexts of different priority sharing CORE_0 from two threads: compare their "
     "latencies."),
    ("A23", "rknn_dup_context: the new context shares weights and model bytes, allocates its own "
            "internal and io buffers, keeps the init flags, starts with core mask AUTO and no io "
            "mems bound.",
     "MEM_SIZE of the duplicate; run it without binding the original's io mems."),
    ("A24", "RKNN_FLAG_SHARE_WEIGHT_MEM works only between contexts of the same network (the "
            "simulator's models carry their weights; on a board the second model is exported "
            "without them); shared weights live until the last context using them is destroyed.",
     "destroy the first context, then run the sharing one."),
    ("A25", "rknn_set_weight_mem needs RKNN_FLAG_MEM_ALLOC_OUTSIDE and copies the weights in "
            "(real writes); rknn_set_internal_mem needs INTERNAL_ALLOC_OUTSIDE or "
            "MEM_ALLOC_OUTSIDE; otherwise PARAM_INVALID.",
     "call them on a context made without those flags."),
    ("A26", "rknn_set_io_mem finds the tensor by attr.name (attr.index only breaks a tie between "
            "an input and an output) and reads the buffer's layout and type from attr.fmt / "
            "attr.type; the mem must hold that layout's bytes (size_with_stride for the native "
            "attr, n_elems x element size for a dense float attr).",
     "bind with an attr whose name is wrong, and with a mem one byte too small."),
    ("A27", "rknn_destroy_mem of a mem still bound unbinds it: io falls back to the runtime's own "
            "buffers; a destroyed weight/internal mem makes the next rknn_run fail.",
     "on a board this is undefined (the NPU may read freed pages): check dmesg for IOMMU faults."),
    ("A28", "A run needs its intermediate tensors in the internal buffer from its first layer to "
            "its last, so two contexts sharing one internal buffer get wrong outputs when their runs "
            "overlap in time (different cores, or AUTO picking idle cores), and right ones one after "
            "another or queued on one core. The simulator computes no intermediate tensors, so it "
            "carries a run's state in a stand-in (rknnlab.sim.internal), only in a caller's internal "
            "mem (rknn_set_internal_mem): when the run's cores are free it fills the plan "
            "[0, total_internal_size) with one byte derived from its inputs and copies its native "
            "inputs to the plan's input slot (the report's feature_tensors: offset 0 in every course "
            "model); at the end of the modeled NPU time the outputs are computed from the input bytes "
            "found there, and the run fills its inputs' places again (later tensors reuse them); an "
            "internal mem that is also a bound input or output mem therefore gives wrong outputs "
            "too. On a "
            "board the input stays in its own io buffer (the SRAM note's table lists input0 outside "
            "the internal range, SramHit '\\'): what collides there is the intermediate tensors, and "
            "the damage would depend on which layers overlap. Rockchip's documents say the pattern is "
            "for models that run one after another; none says what an overlap does on a board.",
     "share one internal buffer between two contexts (create_mem of the larger "
     "total_internal_size, create_mem_from_fd views, rknn_set_internal_mem), run them one after "
     "another and compare with contexts that own their internal memory; then run them at once "
     "from two threads on RKNN_NPU_CORE_0 and RKNN_NPU_CORE_1 many times and count the runs "
     "whose outputs differ."),
    ("A29", "rknn_create_mem2 with RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM puts the mem's first bytes in "
            "NPU SRAM, as many whole 4 KiB pages as the largest free run holds, and the rest in "
            "DDR (rknn_api.h: what does not fit falls back to DDR memory); total_dma_allocated_size "
            "counts only the DDR part; rknn_destroy_mem gives the pages back; the CPU sees the "
            "whole mem at virt_addr as usual.",
     "create_mem2(ctx, 512 KiB, TRY_ALLOC_SRAM) on an RK3588 whose device tree gives the NPU "
     "SRAM: read /sys/kernel/debug/rknpu/mm (root) before, after and after rknn_destroy_mem; "
     "repeat with 2 MiB and compare total_dma_allocated_size with a plain create_mem."),
    ("A30", "phys_addr of a mem is a made-up NPU (IOMMU) address: the first free page-aligned "
            "range of one 4 GiB domain from 0x10000000, used again once its mem is freed; on "
            "a board it is the IOVA the NPU uses. rknn_create_mem_from_phys accepts only addresses "
            "inside such a range (A50).",
     "print mem->phys_addr of a few create_mem calls on a board."),
    ("A31", "NC1HWC2 padding channels (past C) are written as zeros by the input conversion and "
            "by the twin's outputs (the stand-in fills them with pattern bytes). Whole padding "
            "blocks (ppocr_det's one-channel output on rk3588 has C1 = 4: three of them) are "
            "written at the first run into a buffer, then left as they are: a caller who writes "
            "there later reads its own bytes back.",
     "read the padding bytes of a native NC1HWC2 output mem after a run on a board."),
    ("A32", "Native NC1HWC2 tensors have no row padding: C1 x H x W x C2 bytes, as the compiler's plan "
            "reserves (report assumption R5); the plain attr's size_with_stride equals its size. Public "
            "logs contradict this for Rockchip's yolov5s model: with librknnrt 1.5.2, 2.1.0 "
            "(airockchip/rknn-toolkit2#129) and 2.3.2, the 40x40 and 20x20 heads report a "
            "size_with_stride with rows padded to 48 and 32 pixels while w_stride = 0.",
     "print the NATIVE_OUTPUT_ATTR and OUTPUT_ATTR of yolov5s on your board: if size_with_stride "
     "of the 40x40 and 20x20 heads is larger than C1 x H x W x C2 (491,520 and 163,840 B) with "
     "w_stride = 0, your runtime pads rows as those logs show."),
    ("A33", "rknn_outputs_release frees the buf pointers of the outputs passed in (those the runtime "
            "allocated), whichever get they came from.",
     "get twice without release, then release the first get's structs: no crash, and "
     "mallinfo2().uordblks falls by one output."),
    ("A34", "A context may bind only its output mems with rknn_set_io_mem and still take its input "
            "through rknn_inputs_set (and the reverse).",
     "bind only the output mem, set the input with rknn_inputs_set, run, and compare the bound "
     "output with rknn_outputs_get on a context without bindings."),
    ("A35", "RKNN_QUERY_MEM_SIZE answers after a plain rknn_init (flag 0), as Rockchip's rknn_benchmark "
            "and User Guide V2.3.0 section 9.1.2 use it; the API reference V2.3.2 says the query "
            "requires RKNN_FLAG_MEM_ALLOC_OUTSIDE.",
     "rknn_init with flag 0, then rknn_query(ctx, RKNN_QUERY_MEM_SIZE, ...): check the return code, "
     "and compare total_weight_size and total_internal_size with the same query after an init with "
     "RKNN_FLAG_MEM_ALLOC_OUTSIDE."),
    ("A36", "A context has no task buffer and no register-command memory: its DMA buffers are "
            "weights, internal, io and create_mem buffers only. On a board the runtime also "
            "allocates these (User Guide V2.3.0 section 9.1.1 lists register config as a part of "
            "runtime memory): a public librknnrt 2.3.2 RK3588 allocation log (github wtwver/npu, "
            "ops_rknn/run_output.txt) shows a 'task' buffer and a 'regcmdbuffer size' held in a "
            "weight buffer larger than the compiler's weight size; airockchip/rknn-toolkit2#129 "
            "shows a DMA total 9.5 MB above weights + internal right after init.",
     "run with the runtime's debug log on (RKNN_LOG_LEVEL) and read the 'allocated memory, "
     "name: ...' lines at rknn_init: compare the task and weight sizes with total_weight_size, "
     "and total_dma_allocated_size with their sum."),
    ("A37", "Every DMA buffer the runtime allocates (weights, internal, each io tensor, each "
            "create_mem / create_mem2 mem) holds one open file descriptor until it is freed: a "
            "context from rknn_init holds 2 + inputs + outputs descriptors, one with "
            "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY one fewer (no weight buffer). When the process has "
            "no descriptor left (ulimit -n), the create_mem family fails (RKNN_ERR_MALLOC_FAIL "
            "here, NULL from the C function). The docs do not say that a buffer holds a "
            "descriptor, but public logs do: airockchip/rknn-toolkit2#287 (librknnrt 2.3.0, "
            "RK3588, debug log) shows 'allocated memory, name: task, ... fd: 4' at init; "
            "airockchip/rknn-llm#47 and #62 report 'failed to convert handle(1020) to fd ... Too "
            "many open files' while the runtime allocates NPU memory at init (#62: then 'failed to "
            "malloc npu memory' for each further buffer); #532 fails the same way after 1,020 "
            "create_mem2 calls. A board's context also holds a task buffer (A36), so expect at "
            "least 3 + inputs + outputs descriptors there (io perhaps only from the first "
            "rknn_run: A10).",
     "count the entries of /proc/self/fd before and after rknn_init, the first rknn_run, "
     "rknn_create_mem, rknn_destroy_mem and rknn_destroy (rknnlab.lifecycle.open_fds()): expect "
     "3 + inputs + outputs after init and the first run (the task buffer included), and "
     "compare with the 'allocated memory ... fd:' lines of the debug log (RKNN_LOG_LEVEL); then "
     "lower ulimit -n to 64 and make mems until one fails."),
    ("A38", "rknn_destroy returns everything rknn_init allocated (the model copy, the DMA "
            "buffers and their descriptors): an init/destroy loop grows by nothing per cycle in "
            "RSS, the malloc heap, open descriptors or the DMA total. A public report says a "
            "board can differ: rockchip-linux/rknn-toolkit2#284 reports (no maintainer reply) "
            "about 40 MB per model staying after rknn_outputs_release and rknn_destroy with "
            "preallocated outputs. PaddlePaddle/FastDeploy#1858 ('failed to allocate handle' "
            "after about 225 inferences) is not evidence against this assumption: that program "
            "re-created the model object for every inference and its reporter found the "
            "wrapper's release code apparently not running, so its contexts were never "
            "destroyed.",
     "rknnlab.lifecycle.cycle(rt, 'init_destroy', 300) on the board, then cycle_verdict for "
     "rss_kib, heap_bytes and open_fds; watch MemFree and CmaFree in /proc/meminfo too."),
    ("A39", "rknn_destroy_mem(0, mem) of a RKNN_MEM_FLAG_ALLOC_NO_CONTEXT mem unmaps it and "
            "closes its file descriptor: create_mem2 / destroy_mem in a loop keeps the open "
            "descriptors flat. airockchip/rknn-toolkit2#532 reports the opposite on an RK3588: "
            "descriptors leak this way and the loop fails after 1,020 iterations ('Too many open "
            "files'); closing mem->fd by hand before rknn_destroy_mem made it fail later, after "
            "65,487, with 'failed to map memory', so mappings leak too. #532's own text gives no "
            "runtime version: librknnrt 2.3.2 (429f97ae6b), driver 0.9.6 is what the same "
            "reporter gives in #533, the next day.",
     "rknnlab.lifecycle.cycle(rt, 'mem_no_context', 2000) with ulimit -n 1024, then "
     "cycle_verdict(df, 'open_fds'): does create_mem2 fail near 1,020 cycles? Read VmSize in "
     "/proc/self/status and count the lines of /proc/self/maps before and after the loop: a "
     "mapping that is never unmapped grows both. Repeat with a live context as destroy_mem's "
     "ctx (API reference V2.3.2 p.20 says any context may be passed)."),
    ("A40", "rknn_destroy_mem of the model mem of a RKNN_FLAG_MODEL_BUFFER_ZERO_COPY context "
            "while the context lives makes its next rknn_run fail with RKNN_ERR_PARAM_INVALID "
            "(the weights are gone). The API reference V2.3.2 (p.20) only says the buffer must "
            "stay valid until rknn_destroy; on a board the NPU may read freed memory instead, "
            "giving wrong outputs or an IOMMU fault.",
     "WARNING: this makes the NPU read freed memory on a board; it may raise an IOMMU fault or "
     "hang the NPU until a reboot: use a spare board with nothing else running, never one in "
     "service. Destroy the model mem, call rknn_run: check its return code, compare the "
     "outputs with a context loaded from the path, and read dmesg for IOMMU faults."),
    ("A41", "A RKNN_FLAG_COLLECT_MODEL_INFO_ONLY context allocates nothing: no DMA buffer, no "
            "copy of the model, no file descriptor. RKNN_QUERY_MEM_SIZE answers "
            "total_weight_size and total_internal_size with total_dma_allocated_size 0. So an "
            "info-only context never destroyed leaks only a small record here (under 100 bytes "
            "of heap).",
     "make 1,000 info-only contexts without rknn_destroy: compare RSS, the malloc heap and "
     "/proc/self/fd before and after, and query MEM_SIZE of one."),
    ("A42", "rknn_init with RKNN_FLAG_MODEL_BUFFER_ZERO_COPY works with extend = NULL when the "
            "model bytes lie in a create_mem2 buffer: the simulator finds that buffer by its "
            "address (and checks model_buffer_fd only when an extend is given). Rockchip's "
            "documents disagree on this: the API reference V2.3.2 p.20 text and sample fill an "
            "rknn_init_extend (real_model_offset, real_model_size, model_buffer_fd, "
            "model_buffer_flags), while its rknn_init table (p.18) says the extend parameter is "
            "'disabled at the moment' and must be NULL.",
     "rknn_init(ZERO_COPY) of a create_mem2 buffer holding the model, once with extend NULL "
     "and once with p.20's four fields filled: compare the return codes, MEM_SIZE "
     "total_dma_allocated_size and the outputs with a context loaded from the path."),
    ("A43", "rknn_init_extend.real_model_offset / real_model_size apply to a model path and to a "
            "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY buffer, where rknn_api.h and the API reference "
            "V2.3.2 (p.16) say they are valid. On an ordinary buffer (size > 0, no ZERO_COPY) "
            "the simulator refuses values that would select part of it (RKNN_ERR_PARAM_INVALID) "
            "rather than guess: the documents do not say what a board does there (apply them, "
            "or ignore them).",
     "rknn_init of an ordinary buffer holding 16 junk bytes and then the model, with "
     "real_model_offset 16 and real_model_size the model's size: does it succeed (applied) or "
     "fail (model invalid: ignored)? Then with offset 0 and size the whole buffer."),
    ("A44", "A split layer on n cores runs 1 + 0.3 x (n - 1) times faster than on one: 1.3x on "
            "two cores, 1.6x on three. The same public RK3588 trace shows Add 945 -> 573 us and "
            "Concat 2002 -> 1283 us (1.56-1.65x) with RKNN_NPU_CORE_0_1_2; two-core runs and "
            "Conv layers were not measured there.",
     "per-layer profile (RKNN_FLAG_COLLECT_PERF_MASK + RKNN_QUERY_PERF_DETAIL) of yolov5s_relu "
     "with CORE_0, CORE_0_1 and CORE_0_1_2: ratio of the Time(us) of each split layer (WorkLoad "
     "shared between cores) between the masks."),
    ("A45", "Each split layer of a multi-core run costs 3 us more for handing the work between the "
            "cores (User Guide V2.3.0 section 5.3: core switching needs the CPU, so small networks "
            "can get slower with more cores). The constant is a guess; with it digits_cnn is slower "
            "with CORE_0_1_2 than with CORE_0, mobilenet_v2 and yolov5s_relu are faster, yolov5s "
            "(mostly ConvExSwish) about the same.",
     "median rknn_run time of digits_cnn and mobilenet_v2 over 1,000 runs with CORE_0 and "
     "CORE_0_1_2: the difference divided by the number of split layers, after taking out the "
     "split layers' own gain."),
    ("A46", "In the per-layer profile, the InputOperator and OutputOperator rows take 10 us; "
            "that time lies inside the fixed per-run cost of the timing law (A20), so it does not "
            "lengthen the run. Any other layer the runtime runs on the CPU (a Reshape or Transpose "
            "between NPU layers) takes the law's per-SoC CPU hand-over cost. The conversions of "
            "rknn_inputs_set and rknn_outputs_get are not in rknn_run and not in the profile.",
     "read the Time(us) of the InputOperator and OutputOperator rows of RKNN_QUERY_PERF_DETAIL "
     "for mobilenet_v2 and yolov5s. The 10 us may be far off: airockchip/rknn-toolkit2#179 "
     "reports high CPU usage for these rows on an RK3588 board (a commenter, not a "
     "maintainer, says they move data between the CPU and the NPU)."),
    ("A47", "MacUsage = a layer's MACs on a core / (its time x MACs per cycle x NPU clock), with "
            "1024 MACs per cycle and core on rk3588 and rk3576, 512 on rk3568, rk3566 and rk3562: "
            "the densest layers of every shipped compiler report but ppocr_det's get exactly "
            "MACs / 1024 (or / 512) NPU cycles (ppocr_det's densest, ConvHardSwish layers, get "
            "MACs / (75/76 of it)), and on rk3588 the formula reproduces a public board's MacUsage (a 3x3 "
            "conv of 1,061,683,200 MACs in 1612 us: 64.32 %). rk3566 has no report here and is "
            "taken as rk3568. A layer split over n cores shows its share (1/n of the MACs) on each.",
     "for a Conv row of RKNN_QUERY_PERF_DETAIL, compute MACs from its shapes and compare "
     "MACs / (Time(us) x 1e-6 x 1024 x 1e9) with its MacUsage column (512 on rk3568)."),
    ("A48", "RKNN_QUERY_PERF_DETAIL answers only a context made with RKNN_FLAG_COLLECT_PERF_MASK "
            "(rknn_dup_context keeps the flag), and only after a first rknn_run; otherwise "
            "RKNN_ERR_PARAM_INVALID (a board may instead return an empty text). perf_data points "
            "to a NUL-terminated text owned by the context until the next PERF_DETAIL query on it "
            "or rknn_destroy; data_len counts the text without the NUL. It describes the last "
            "run, whose duration the flag does not change (Rockchip warns the profiled numbers "
            "may be worse than actual performance).",
     "query PERF_DETAIL on a context made without the flag and on one with the flag before any "
     "run (return codes); with the flag, compare data_len with strlen(perf_data), and the "
     "median rknn_run time with and without the flag."),
    ("A49", "The PERF_DETAIL text follows the layout public RK3588 printouts of librknnrt 1.6-2.x "
            "show (columns ID ... FullName, totals, ranking table) with widths of our choosing; "
            "the WorkLoad column is headed WorkLoad(0/1/2) on rk3588, (0/1) on rk3576 and (0) on "
            "one-core SoCs (the user guide shows only the first two); CPU layers show 0.0% on "
            "every core and MacUsage \\; Time(us), RW(KB) and the totals are whole numbers. "
            "The reports keep the input shapes the compiler's log printed but not the ',...' that "
            "ends a cut list: the simulator puts it back where the shapes cannot account for the "
            "layer (a Conv fused with an Add showing fewer than 4, a Concat whose inputs' channels "
            "fall short of its output's), which matches the logs on every row but rk3562 yolov5s's "
            "three OutputOperators.",
     "print RKNN_QUERY_PERF_DETAIL on an rk3588 and an rk3568 board and compare the headers, "
     "the CPU rows and the number formats."),
    ("A50", "rknn_create_mem_from_phys(ctx, phys, virt, size) needs phys .. phys + size inside the "
            "phys range of a live mem of this runtime (the simulator has no physical memory of its "
            "own: A30); the new mem maps the same pages again at a new virt_addr (virt is not "
            "used), has fd -1, flags RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS and counts in no DMA total "
            "(A9). Anything else is RKNN_ERR_PARAM_INVALID here (NULL from the C function). The API "
            "reference V2.3.2 (p.32) only says the call wraps a physical address, a virtual address "
            "and a size; Rockchip's MMZ demo uses it with CMA memory from its own allocator.",
     "create a mem from the phys address of a CMA buffer (or of mem->phys_addr + 4096 of a "
     "create_mem mem), write through one mapping and read through the other; print the new "
     "mem's virt_addr, fd and flags; pass a phys address no buffer holds and check the result."),
    ("A51", "With RKNN_FLAG_MEM_ALLOC_OUTSIDE the runtime allocates no input or output buffer: "
            "rknn_run fails (RKNN_ERR_PARAM_INVALID) until every input and output has a mem bound "
            "with rknn_set_io_mem, and rknn_inputs_set fails for an input without one. The API "
            "reference V2.3.2 (p.18) says input, output, weight and internal memory are all "
            "allocated by the user with this flag, and both of Rockchip's demos that use it "
            "(rknn_internal_mem_reuse_demo and the dynamic-shape demo's alloc-outside variant) "
            "bind every input and output; none of its documents says what happens without them. "
            "A binding in a layout other than the native one still gets a conversion buffer from "
            "the runtime (A10).",
     "rknn_init with RKNN_FLAG_MEM_ALLOC_OUTSIDE, set the weight and internal mems, then call "
     "rknn_inputs_set and rknn_run without any rknn_set_io_mem: read both return codes and "
     "total_dma_allocated_size before and after."),
    ("A52", "A model built with one input shape (no dynamic_input) refuses "
            "RKNN_QUERY_INPUT_DYNAMIC_RANGE with RKNN_ERR_MODEL_INVALID (-6), as public logs of "
            "librknnrt 2.3.0 show ('query RKNN_QUERY_INPUT_DYNAMIC_RANGE error, rknn model is static "
            "shape type', then rknn-toolkit-lite2's 'Ret code: RKNN_ERR_MODEL_INVALID': "
            "airockchip/rknn_model_zoo#271, a15355447898a/mt-photos-ai-rk-all#1), and refuses "
            "rknn_set_input_shapes with RKNN_ERR_PARAM_INVALID (assumed: no log shows it); the "
            "RKNN_QUERY_CURRENT_* attrs answer its one shape (the plain and native attrs, assumed).",
     "on a static model, call rknn_query(RKNN_QUERY_INPUT_DYNAMIC_RANGE) and "
     "rknn_set_input_shapes with its own INPUT_ATTR: read the return codes and shape_number; "
     "query RKNN_QUERY_CURRENT_INPUT_ATTR."),
    ("A53", "NPU SRAM: the simulated RK3588's device tree reserves all 978,944 B (956 KiB, 239 "
            "pages of 4 KiB) for the NPU, the most the SRAM note allows (the note says the device "
            "tree must reserve it; a board without that reservation has none and answers 0); the "
            "other SoCs have "
            "none. One allocator serves the whole process (on a board the driver's serves every "
            "process). RKNN_QUERY_MEM_SIZE answers every context (flag 0 too) total_sram_size = that "
            "reservation (rknn_api.h: 'total system sram size reserved for rknn') and free_sram_size "
            "= what is free of it at the query, 0/0 on the other SoCs. rknn_init with "
            "RKNN_FLAG_ENABLE_SRAM puts the first pages of the runtime's internal buffer in SRAM, as "
            "many as the largest free run holds, the rest in DDR; total_dma_allocated_size counts "
            "only the DDR part; rknn_destroy gives the pages back; rknn_dup_context takes its own. "
            "Internal memory from outside and weights get no SRAM (the older note's environment "
            "variables are not modeled). RKNN_FLAG_SHARE_SRAM without ENABLE_SRAM is "
            "RKNN_ERR_PARAM_INVALID; with it, it changes nothing (User Guide V2.3.0 section "
            "5.7.2: not yet implemented).",
     "on an RK3588 (dmesg | grep -i 'sram region' shows whether its device tree reserves SRAM): "
     "query MEM_SIZE (all five fields) of a flag-0 context, then rknn_init mobilenet_v2 with "
     "ENABLE_SRAM and query both again; read /sys/kernel/debug/rknpu/mm (root) while each context "
     "lives and after rknn_destroy; init a second ENABLE_SRAM context while the first lives and "
     "compare."),
    ("A54", "SRAM saves time only where the timing law counts bytes (A20): a layer the "
            "compiler gives 0 cycles (Add, Concat, Resize, ...) moves its RW(KB) at the SoC's "
            "zero-cycle rate, and the share SRAM serves (the SramHit of the tensors it reads plus "
            "that of the tensor it writes) is not moved. A layer with cycles is timed by its "
            "compute cycles (a fit on the compiler's total cycles, DDR included, did worse: A20), so SRAM "
            "does not speed it up; its DDR cycles still fall by the served share. PERF_RUN and "
            "PERF_DETAIL's Time(us) show the effect; Cycles and RW(KB) stay the compiler's. The "
            "SRAM note only says a hit 'generally saves' the read and write bandwidth of its "
            "size; User Guide V2.3.0 section 5.7 says SRAM may affect inference time.",
     "median rknn_run time and RKNN_QUERY_PERF_DETAIL of mobilenet_v2 on RKNN_NPU_CORE_0 "
     "with and without RKNN_FLAG_ENABLE_SRAM (RKNN_FLAG_COLLECT_PERF_MASK): compare the "
     "Time(us) of the layers whose tensors show an SramHit in the RKNN_LOG_LEVEL=3 table."),
    ("A55", "The RKNN_LOG_LEVEL=3 SRAM table (SimRuntime.sram_log, also written to stderr at "
            "rknn_init when RKNN_LOG_LEVEL >= 3) follows the SRAM note's layout: the SRAM part "
            "as an address range starting at the internal buffer, one row per row of the "
            "compiler's feature tensor table with SramHit = its bytes inside that range, io "
            "tensors in their own buffers with '\\', and a footer with the weight and internal "
            "totals and 'Predict SRAM Hit RW Amount' = 2 x the sum of SramHit (the note's "
            "figures: 2 x 3,344,384 = 6,688,768). Addresses are made up (A30); column widths "
            "are ours; the note's other two 'Predict ... RW Amount' lines are left out (no "
            "formula found that gives them).",
     "run mobilenet_v2 with ENABLE_SRAM and RKNN_LOG_LEVEL=3 on an RK3588 with SRAM: compare "
     "the table's rows and SramHit column with SimRuntime.sram_log, and the footer's lines."),
    ("A56", "Dynamic shapes (a model built with rknn-toolkit2's dynamic_input): "
            "RKNN_QUERY_INPUT_DYNAMIC_RANGE lists the shapes in the order the .rknn stores them "
            "(smallest first here), each in its INPUT_ATTR's fmt (NHWC: Rockchip's demo copies "
            "them into an INPUT_ATTR's dims). rknn_set_input_shapes reads each attr's dims in its "
            "fmt and takes only a listed shape (else RKNN_ERR_PARAM_INVALID listing them). Before "
            "the first rknn_set_input_shapes, rknn_inputs_set and rknn_run fail "
            "(RKNN_ERR_PARAM_INVALID) and INPUT_ATTR, OUTPUT_ATTR and the CURRENT_* queries answer "
            "the largest shape (the report's top level, the toolkit's MaxShape: the models' "
            "assumption R6); after it the CURRENT_* queries answer the shape set. rknn_init "
            "allocates the io buffers and the internal buffer once, for the largest shape: "
            "MEM_SIZE does not change with the shape. A mem bound with set_io_mem holds for the "
            "shape it was bound with: after a change, rknn_run fails until it is bound again with "
            "the CURRENT_* attr (the User Guide V2.3.0 section 5.4.4.2 says to call set_io_mem "
            "again). rknn_dup_context of a dynamic-shape context, and rknn_init of a dynamic-shape "
            "model with RKNN_FLAG_SHARE_WEIGHT_MEM, fail with RKNN_ERR_PARAM_INVALID (the codes are "
            "assumed): the User Guide V2.3.0 section 5.4.4.1 forbids the dup, and librknnrt 1.5.2 "
            "(its RK3588 binary in rockchip-linux/rknpu2) holds the log line 'RKNN_FLAG_SHARE_WEIGHT_MEM "
            "is invalid, dynamic shape rknn model is not supported!'; a dup shares the weights the "
            "same way. Each shape runs the compiler's own "
            "plan for it (its layers and times). Values "
            "come from mobilenet_v2's ONNX twin run at that size (one quantization for all "
            "shapes, as compiled).",
     "with Rockchip's dynamic-shape demo model: print RKNN_QUERY_INPUT_DYNAMIC_RANGE; call "
     "rknn_run before rknn_set_input_shapes; query INPUT_ATTR, CURRENT_INPUT_ATTR and MEM_SIZE "
     "before and after setting each shape; switch the shape and run with the old io mems "
     "bound (return code, outputs); call rknn_dup_context on the context, and rknn_init the "
     "model with RKNN_FLAG_SHARE_WEIGHT_MEM and extend.ctx = that context (return codes, log); "
     "compare the median rknn_run time per shape with static "
     "builds of each size."),
    ("A57", "rknn_set_internal_mem refuses (RKNN_ERR_PARAM_INVALID) a mem whose size - offset is "
            "smaller than the context's total_internal_size, and the context keeps no internal "
            "memory. The API reference V2.3.2 (p.18-19) and Rockchip's internal-memory reuse demo "
            "size the mem from total_internal_size (the largest of the models that share it); no "
            "Rockchip document says what the runtime does with a smaller one: a board may accept it "
            "and let the NPU write past its end.",
     "rknn_set_internal_mem with a mem of total_internal_size - 4096 bytes (a create_mem_from_fd "
     "view of a larger buffer, so that the bytes after it are mapped): read the return code; if "
     "it is 0, run, compare the outputs with a flag-0 context's and check dmesg for IOMMU faults."),
    ("A58", "With RKNN_FLAG_MEM_ALLOC_OUTSIDE the NPU reads the weights from the caller's weight "
            "mem at every run, so a weight mem that something else writes into gives wrong outputs: "
            "the same mem given to rknn_set_internal_mem too, an internal view overlapping it (every "
            "run writes its intermediate tensors there: A28), or the CPU writing into it. The "
            "simulator computes nothing with the weight bytes: rknn_set_weight_mem keeps a sample "
            "of 16,384 evenly spaced bytes of what it wrote (rknnlab.sim.weightprint) and each run "
            "compares it at its start and its end; a changed sample makes that run's outputs "
            "meaningless bytes (the same for the same damage) until rknn_set_weight_mem is called "
            "again. Views of one buffer that do not overlap are right. The API reference V2.3.2 "
            "(p.18-19) says the caller allocates the weight memory with this flag; no Rockchip "
            "document says the runtime copies the weights elsewhere, nor what a board does when "
            "the weight and internal memory overlap.",
     "rknn_init with RKNN_FLAG_MEM_ALLOC_OUTSIDE, one mem of max(total_weight_size, "
     "total_internal_size) given to both rknn_set_weight_mem and rknn_set_internal_mem: run "
     "three times and compare the outputs with a flag-0 context's; then weights and internal "
     "as non-overlapping create_mem_from_fd views of one buffer (right outputs expected); "
     "then write zeros over part of a correct weight mem between two runs."),
    ("A59", "rknn_set_io_mem, rknn_set_weight_mem and rknn_set_internal_mem refuse "
            "(RKNN_ERR_PARAM_INVALID) a mem created with another live context: each context gets "
            "its own mem or its own view of a shared buffer (rknn_create_mem_from_fd with its own "
            "ctx), as Rockchip's internal-memory reuse demo does for every context. A mem made with "
            "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT (ctx 0) belongs to no context and is accepted by any. "
            "No Rockchip document says what a board does with another context's mem, and "
            "librknnrt 1.5.2's log strings name no check of a mem's context: a board most likely "
            "accepts it. The simulator refuses it to keep to the one pattern Rockchip's code uses "
            "(a view per context); on a board the owner's rknn_destroy may free that mem (A7) "
            "while this context still uses it.",
     "create a mem with context A (rknn_create_mem(ctx_a, size)) and pass it to "
     "rknn_set_internal_mem, rknn_set_weight_mem and rknn_set_io_mem of a context B: read the "
     "return codes; if they are 0, run B, then rknn_destroy(A) and run B again (outputs, dmesg)."),
    ("A60", "A context made with RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE or "
            "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE does no cache maintenance for the cacheable "
            "mems bound to it with rknn_set_io_mem; the caller's rknn_mem_sync does it "
            "(rknnlab.sim.cache). rknn_mem_sync copies nothing: Rockchip's rknpu driver "
            "(rknpu_gem.c, rknpu_gem_sync_ioctl) turns TO_DEVICE into a cache clean and "
            "FROM_DEVICE into an invalidate (dma_sync_*_for_device / _for_cpu). OUTPUT flag, "
            "output bound with the native attr: the CPU's cache holds no line of the mem when it "
            "is bound and after each rknn_mem_sync with RKNN_MEMORY_SYNC_FROM_DEVICE or "
            "BIDIRECTIONAL (which shows the CPU what the NPU last wrote); a run's bytes reach the "
            "CPU's view (virt_addr, every numpy view of it, rknn_outputs_get) only while it holds "
            "no line. The simulator cannot see the CPU's reads, so it takes the CPU to read each "
            "output right after its run: from then on it holds lines, and later runs stay out of "
            "its view until the next FROM_DEVICE or BIDIRECTIONAL sync. So a loop with no sync "
            "reads the first frame's output for ever (TO_DEVICE alone changes nothing); a sync "
            "after the run reads each frame's own; so does a sync before the run here, because "
            "the CPU holds no line when the NPU writes. On a board a sync before the run is "
            "mostly right but not safe: between the invalidate and the NPU's write the CPU may "
            "bring lines back (speculative prefetch, or a read of the buffer, which the "
            "simulator does not see), and those keep the old bytes; the safe place is after "
            "rknn_run returns, before the first read. The same blind spot makes the simulator "
            "optimistic after a sync: in 'sync, read, run, read' the CPU reads after the sync and "
            "holds lines again, so a board shows the second read stale where the simulator shows "
            "it fresh (lab 6's check therefore asks for a sync between every two runs). "
            "Staleness is whole-buffer here: the worst "
            "case for a loop that never syncs. A board shows stale lines only, where the caches still hold them; a core "
            "reading ppocr_det's channel block 0 on RK3588 touches 3.7 MB of lines, more than its "
            "own L2 (512 KB on a Cortex-A76) and the 3 MB shared L3 keep, so part of a map reads "
            "new even without a sync. INPUT flag: the NPU reads what a bound input mem held at its "
            "rknn_set_io_mem or its last rknn_mem_sync with TO_DEVICE or BIDIRECTIONAL, not the "
            "CPU's later writes (rknn_inputs_set into it included); FROM_DEVICE alone on such a "
            "mem drops those writes, as an invalidate may. NON_CACHEABLE mems, the runtime's own "
            "io buffers, an output bound in another layout (the CPU converts it) and contexts "
            "without the flags stay coherent (A11); a mem imported from an fd the runtime did not "
            "allocate counts as cacheable. rknn_dup_context keeps the flags. rknn_api.h's comments "
            "on the two flags say only that the runtime then does not flush the inputs or "
            "invalidate the outputs, that the caller must sync, and not to combine them with "
            "rknn_inputs_set / rknn_outputs_get. Views of one buffer made with "
            "rknn_create_mem_from_fd do not share this state.",
     "on a board, rknn_init with RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE and bind a cacheable "
     "output mem with the native attr; run frame A, sync FROM_DEVICE and read the whole output; "
     "run frame B and read it without a sync: count the bytes equal to A's and to B's (the "
     "fraction stale); repeat the loop over many frames with the sync before the run and with "
     "it after (count the frames with any stale byte). Then rknn_init with "
     "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE, bind a cacheable input mem, write frame 1, "
     "rknn_mem_sync TO_DEVICE, run; write frame 2 without a sync, run, and compare the outputs "
     "with those of frame 1 and frame 2."),
    ("A61", "Output values of the models shipped with their fp32 ONNX network, the twin "
            "(mobilenet_v2, mobilenet_v2_dynamic through mobilenet_v2's, yolov5n, digits_cnn, "
            "ppocr_det), are "
            "computed in float, not in INT8: a run dequantises the native int8 input with the "
            "input's zp/scale, runs the twin with onnxruntime and quantises each float output "
            "with its zp/scale (round half to even, saturating) into the native layout "
            "(rknnlab.sim.outputs). So the simulator's int8 output differs from the fp32 "
            "network's by input and output quantisation only; the INT8 network's own error "
            "(int8 weights and activations in every layer) is not modeled: rknn-toolkit2's INT8 "
            "simulation (recorded for ppocr_det in data/models/ppocr_det/toolkit_int8.npz) or a "
            "board shows it. Inside rknnlab.sim.values_replayed() a twin runs no inference and "
            "writes the outputs it computed last (the last computed frame's, not this frame's): "
            "a tool for timing runs, whose times, allocations and calls stay the same. The other "
            "models (yolov5s, yolov5s_320, yolov5s_480, yolov5s_relu, yolov5m, resnet50, "
            "mobilenet_v2_160, mobilenet_v2_320) write a stand-in pattern that follows the input "
            "and means nothing.",
     "on a board, run the same input frames through the INT8 model and compare its int8 "
     "output (and the boxes or classes from it) with the fp32 twin's on the PC and with "
     "rknn-toolkit2's INT8 simulation (ppocr_det: toolkit_int8.npz holds its inputs and "
     "maps); the board's output should sit nearer the toolkit's than the twin's."),
    ("A62", "rknn_set_io_mem refuses (RKNN_ERR_PARAM_INVALID) an input mem smaller than the "
            "layout of the attr it is bound with (A26) at the bind itself: digits_cnn's native "
            "input on rk3588 (size_with_stride 128 B) bound to a mem of n_elems = 64 B fails "
            "there, before any run. No Rockchip document says when a board checks the size. The "
            "facts sheet records that the runtime warns when a bound buffer is smaller than "
            "size_with_stride (the exact log wording is unconfirmed), so a board may return 0 at "
            "the bind with a warning in its log. The run may then fail with 'failed to submit' "
            "and rknn_run returning -1 (RKNN_ERR_FAIL), or the NPU may read past the mem's end. "
            "The User Guide V2.3.0 (section 10.9) ties 'failed to submit' in the first conv with "
            "zero-copy to an undersized input, and in a later layer to a model, toolkit or "
            "runtime mismatch. Public logs of 'failed to submit' with -1: "
            "airockchip/rknn-toolkit2#554 (zero-copy, librknnrt 2.3.2, op Concat), whose cause "
            "the thread does not show, and rockchip-linux/rknn-toolkit2#320 (op "
            "Conv:/model.0/conv/Conv, multi-core), fixed by a driver update.",
     "on a board, create a mem of n_elems bytes (64) for digits_cnn's native input "
     "(size_with_stride 128 on an RK3588), rknn_set_io_mem it with the native attr, read "
     "the return code and the RKNN_LOG_LEVEL=4 log (a warning?); if it is 0, rknn_run and "
     "read that return code, the log and dmesg (IOMMU faults)."),
    ("A63", "Return codes the API reference's table implies but no public log of a 2.x runtime "
            "shows: rknn_init of a course model compiled for another SoC returns "
            "RKNN_ERR_TARGET_PLATFORM_UNMATCH (-13), the code described as a model not "
            "compatible with the current platform; a call with ctx 0 (an rknn_init that failed) "
            "or with a destroyed context returns RKNN_ERR_CTX_INVALID (-7). Public logs differ "
            "by version: librknnrt 1.2.0 on an RK3568 returned -1 for a model built for RK3588 "
            "(rockchip-linux/rknpu2#25, log: the model does not match the RKNPU hardware "
            "version), while the RKNPU1 runtime 1.7.0 returned -13 for a model of another SoC "
            "(rockchip-linux/rknn-toolkit#133). No document says a board checks a destroyed "
            "context: the call may crash instead.",
     "on an RK3588, rknn_init the rk3568 build of digits_cnn (and the rk3588 build on an "
     "RK3568): read the return code and the RKNN_LOG_LEVEL=4 log; call rknn_run with ctx 0 "
     "and read its return code."),
    ("A64", "rknn_inputs_set reads a buffer larger than the input needs (n_elems x the size of "
            "rknn_input.type; with pass_through, the native size_with_stride) up to that size and "
            "returns 0. So float32 data declared UINT8 is accepted and its first bytes are read as "
            "pixels, and so is a frame of a larger shape after rknn_set_input_shapes chose a smaller "
            "one. A smaller buffer returns RKNN_ERR_PARAM_INVALID (-5), as public librknnrt 2.3.2 "
            "logs show: 'param input size(1228800) < model input size(4915200)', then -5 "
            "(airockchip/rknn-toolkit2#558, RK3568; also airockchip/rknn_model_zoo#298). That log "
            "compares with '<', and no public log shows a larger input refused. The other faults "
            "of an rknn_input (a count or index past the model's inputs, a NULL buf, a type or fmt "
            "the simulator does not convert, an input bound to a converting mem) return "
            "RKNN_ERR_INPUT_INVALID (-8), the API reference's code for an invalid rknn_input; no "
            "public log of a 2.x runtime shows which code a board returns for them.",
     "on a board, rknn_inputs_set digits_cnn's 8x8x1 input (type UINT8, fmt NHWC) with size 63, "
     "64 and 256 and read each return code and the RKNN_LOG_LEVEL=4 log; rknn_run after the "
     "256 B call and compare the scores with the 64 B call's (same first 64 bytes); then call it "
     "with index 1 and with buf NULL and read those codes."),
    ("A65", "rknnlab.lite.RKNNLite (the simulator's RKNNLite) hands the bytes that load_rknn read to "
            "rknn_init as a buffer, so the runtime's copy of the model sits beside the Python bytes "
            "object, which stays until the RKNNLite object goes. The wheel's rknn_lite.py (2.5.0) "
            "passes those bytes to its compiled runtime module, whose strings name rknn_init; which "
            "init path that module takes is not public.",
     "on a board, load a large model with rknnlite: read VmRSS after load_rknn (up by the file "
     "size), after init_runtime, and after release() (the bytes stay until del)."),
    ("A66", "RKNNLite.inference copies each input array into a staging buffer per input that only "
            "grows, calls rknn_inputs_set, then rknn_run, then rknn_outputs_get with want_float=1 "
            "and is_prealloc=1 into a float32 buffer per output that only grows, and "
            "rknn_outputs_release at once. The grow-only buffers are in the docstrings of the 2.5.0 "
            "wheel's compiled runtime module; float32 outputs are public (a user's int8-output model "
            "gave float32 arrays, airockchip/rknn-toolkit2#445). Assumed: is_prealloc=1; that "
            "rknn_input.type is the array's dtype when data_type is None (the wheel's docstring says "
            "'default uint8', but its 'Unsupport inputs[i].dtype' message checks the array); that fmt "
            "is the model's own when data_format is None; and, on the simulator, the frame id comes "
            "from rknn_outputs_get's extend (the wheel reads it from rknn_run's).",
     "on a board, check that inference() returns float32 arrays for an int8 model, that a "
     "float32 frame (no data_type) gives the same top class as the uint8 frame, and that RSS "
     "stays flat over 1,000 calls with gc.collect() after each."),
    ("A67", "RKNNLite.inference(reuse_outputs=True) has rknn_outputs_get write straight into one "
            "float32 staging array per output and returns views of them, so the next call "
            "overwrites the arrays it returned; the arrays only grow and release() frees them. "
            "Without reuse_outputs each call returns new arrays copied out of the output buffer. "
            "The overwrite, the growth rule and the release are the wheel's docstrings; writing "
            "straight into the staging array is assumed.",
     "on a board with rknn-toolkit-lite2 2.5.0, keep the outputs of two reuse_outputs=True calls "
     "on different frames: the first list must now hold the second frame's values."),
    ("A68", "RKNNLite.inference checks its inputs with the messages of the 2.5.0 wheel's compiled "
            "runtime module: a list is required ('Inputs should be placed in a list'), each item an "
            "ndarray of int8, uint8, int16, float16 or float32; data_type, when given, must match the "
            "dtype; a byte count other than the model input's element count times the item size is "
            "refused ('Size of inputs[i] is invalid!'; the exact rule is assumed); an array with "
            "another number of dims is fed after a warning; an NCHW array (data_format='nchw') for an "
            "NHWC model is transposed after a warning, into a staging array kept for the next call "
            "(assumed: the module names copyto and a staging getter keyed by dtype). A dynamic-shape "
            "model gets rknn_set_input_shapes whenever the fed shape changes, then the current attrs "
            "(the module names both).",
     "on a board, call inference with a frame one row short, with a 3-D HWC frame, with a tuple, "
     "and with an NCHW frame and data_format='nchw'; read the log lines and the results."),
    ("A69", "RKNNLite.init_runtime on a one-core SoC (RK3562, RK3566/RK3568) ignores core_mask after "
            "the wheel's warning that core_mask is only supported by RK3576 and RK3588; on RK3576 it "
            "replaces NPU_CORE_2 with NPU_CORE_0 and NPU_CORE_0_1_2 with NPU_CORE_0_1, with the "
            "wheel's warnings (strings of its compiled runtime module); any other mask the NPU lacks "
            "returns -1. At each init of a static model it prints the wheel's 'Query dynamic range "
            "failed' warning. async_mode=True and encrypted models (key_path) are refused on the "
            "simulator with an 'E' line, because it models neither. get_sdk_version returns "
            "'RKNN VERSION:' then the API and DRV lines; the separators a board may print around "
            "them are left out.",
     "on an RK3568 board, init_runtime(core_mask=RKNNLite.NPU_CORE_0) and read the return code "
     "and the log; on an RK3576, NPU_CORE_2; print get_sdk_version()."),
    ("A70", "RKNNLite.list_support_target_platform(model) returns a dict with the keys "
            "'support_target_platform' and 'filled_target_platform' (names in the 2.5.0 wheel's "
            "compiled module), each a list of SoC names; SoCs with the same NPU model in the wheel's "
            "config/cpu_npu_mapper.yml (RK3566 and RK3568: RKNPU2-LITE) are supported together. "
            "Without a model it prints and returns the SoCs by NPU model. The value format is assumed.",
     "on a board, print lite.list_support_target_platform('model.rknn') for an RK3568 model."),
    ("A71", "The simulated RKNNLite leaves no reference cycle per inference() call, so its memory "
            "stays flat without gc.collect(). A user measured 42.43 kB per call with "
            "rknn-toolkit-lite2 2.3.2 on an RK3588 (airockchip/rknn-toolkit2#42: RSS 80.6 to 661.5 MB "
            "over 13,690 calls, 0.158 kB per call with gc.collect() every 5 calls); no public "
            "measurement says whether 2.5.0 still leaves a cycle. The simulator does not fake one.",
     "on a board with rknn-toolkit-lite2 2.5.0, gc.disable(), run 10,000 inference() calls and "
     "fit RSS per call; then gc.collect() and read how many objects it found."),
    ("A72", "What only C can pass (the simulator's librknnrt.so for PCs, rknnlab.sim.capi): a NULL "
            "pointer a call needs (the context out-parameter, the model, an attr, an array with n > 0) "
            "and an rknn_query size smaller than the struct the command fills return "
            "RKNN_ERR_PARAM_INVALID, after the context and command were checked; a larger size is "
            "accepted and the struct's own size written. No document gives these codes.",
     "on a board, call rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &num, sizeof num - 1) and "
     "rknn_init(NULL, path, 0, 0, NULL) and print the codes."),
    ("A73", "rknn_wait returns RKNN_ERR_PARAM_INVALID: the API reference (V2.3.2, Table 4-1) says "
            "non-blocking runs are not available, so there is never a run to wait for. "
            "rknn_set_batch_core_num accepts 1 to the SoC's core count and changes nothing for the "
            "course's batch-1 models; other values return RKNN_ERR_PARAM_INVALID. The deprecated "
            "rknn_set_input_shape(ctx, attr) acts as rknn_set_input_shapes(ctx, 1, attr) on a "
            "one-input model and is refused for more inputs; rknn_create_mem_from_mb_blk (RV1103/RV1106 "
            "only) returns NULL. The codes a board returns are not documented.",
     "on an RK3588, call rknn_wait(ctx, NULL) after rknn_run, and rknn_set_batch_core_num(ctx, n) "
     "for n = 0 to 4 on a batch-1 model; print the codes."),
    ("A74", "RKNN_QUERY_CUSTOM_STRING answers an empty string (1,024 zero bytes) for every course "
            "model: the build (tools/models/build.py) passes no custom_string to rknn.config, and "
            "Rockchip's demos (rknn_benchmark, the model zoo's C demos) make this query on any model "
            "and stop if it fails, so a board answers it for a model without one. That the answer "
            "is then empty rather than something the toolkit writes is assumed.",
     "on a board, query RKNN_QUERY_CUSTOM_STRING on data/models/mobilenet_v2/rk3588.rknn and "
     "print its bytes."),
]


class AssumptionsTable:
    """Some of the simulator's assumptions, one line each, for the end of a chapter.

    In a notebook it renders as one folded line (how many assumptions); opened, it
    shows one folded line per assumption (its id and the assumption; the board
    check opens under it), each with a disclosure marker, so a list of any length
    stays short on screen. Each folded line also ends with a bracketed cue in its text
    (an untrusted notebook loses the marker's style); ``str()`` gives the same as plain
    text, one line each."""

    title = "Simulator assumptions in this chapter"
    #: visible in the text of every folded line, trusted output or not
    head_cue = "[click to open the list, then a line for its board check]"
    row_cue = "[click for the board check]"

    def __init__(self, keys: Sequence[str]) -> None:
        by_id = {key: (assumption, check) for key, assumption, check in ASSUMPTIONS}
        unknown = [key for key in keys if key not in by_id]
        if unknown:
            raise KeyError(f"no simulator assumption {', '.join(unknown)} "
                           f"(rknnlab.sim.ASSUMPTIONS has A1-A{len(ASSUMPTIONS)})")
        self.rows = [(key,) + by_id[key] for key in dict.fromkeys(keys)]

    def __str__(self) -> str:
        head = (f"{self.title}: {len(self.rows)} of the {len(ASSUMPTIONS)} in "
                "rknnlab.sim.ASSUMPTIONS")
        return "\n".join([head] + [f"{key}: {assumption}" for key, assumption, _ in self.rows])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        # JupyterLab sets list-style none on <summary>, so a folded line shows no marker
        # and does not look as if it opens. "revert" gives each summary the browser's own
        # marker back (closed, or open when its <details> is) when the output is trusted.
        # An untrusted output (a notebook executed elsewhere, opened from disk) loses that
        # style to JupyterLab's sanitizer, so each line also ends with a bracketed cue in
        # its text, which no sanitizer removes. The whole list folds under one line: a
        # chapter's end stays short on screen.
        marker = "display:list-item; list-style:revert; cursor:pointer"
        rows = "".join(
            f"<details><summary style='{marker}'><b>{key}</b>: {html.escape(assumption)} "
            f"<i>{self.row_cue}</i></summary>"
            f"<p style='margin:0.2em 0 0.6em 2em'><i>Board check:</i> {html.escape(check)}</p></details>"
            for key, assumption, check in self.rows)
        head = (f"<b>{self.title}</b>: {len(self.rows)} of the {len(ASSUMPTIONS)} in "
                f"<code>rknnlab.sim.ASSUMPTIONS</code> <i>{self.head_cue}</i>")
        return (f"<details class='rknnlab-assumptions'><summary style='{marker}'>{head}</summary>"
                f"<div style='margin-left:1.2em'>{rows}</div></details>")


def assumptions_table(keys: Sequence[str]) -> AssumptionsTable:
    """The assumptions ``keys`` (e.g. ["A3", "A15"]) as a short table for a chapter's end.

    Every chapter ends with the same display: one line per assumption, its board
    check folded under it. An unknown id is an error, so a renumbered list
    cannot go stale silently."""
    return AssumptionsTable(keys)


def modeled_run_ms(model: str, soc: str = "rk3588", core_mask: int = abi.RKNN_NPU_CORE_0) -> float:
    """Modeled duration (ms) of one rknn_run of course model ``model`` on ``soc``
    with ``core_mask``, from its compiler report alone (no .rknn needed: the
    report-only models of :func:`rknnlab.models.list_reports` work too): the time
    the simulator's rknn_run blocks for on an idle NPU (the timing law, A20)."""
    report = models.load_report(model, soc)
    return npu.run_seconds_of(npu.layer_times(report, soc, core_mask), soc) * 1e3


def _assumptions_text() -> str:
    lines = []
    for key, assumption, check in ASSUMPTIONS:
        lines.append(f"{key}: {assumption}\n    check: {check}")
    return "\n".join(lines)


__doc__ = f"{__doc__ or ''}\n{_assumptions_text()}\n"

__all__ = ["SimRuntime", "ASSUMPTIONS", "assumptions_table", "modeled_run_ms", "values_replayed"]
