"""A video pipeline on the NPU (Chapter 6, Case study): NV12 frames from a seeded camera,
colour conversion and letterbox into the model's input, the run, int8 post-processing into
text boxes, and the measurements of the whole loop (time per stage, workers and NPU cores,
memory over many frames).

==============================  =====================================================
frames                          :class:`Nv12Frame`, :func:`nv12_size`, :func:`rgb_size`,
                                :func:`to_nv12`, :func:`nv12_to_rgb`, :class:`Camera`
pre-processing                  :func:`letterbox`, :class:`Letterbox`,
                                :func:`rga_problems` (RGA's documented alignment rules)
post-processing                 :func:`int8_threshold`, :func:`find_boxes` (int8, read in
                                place), :func:`find_boxes_float` (the float route), :class:`Box`
accuracy                        :func:`box_agreement`, :func:`iou`, :func:`reference_boxes`,
                                :func:`fp32_probabilities` (the ONNX twin),
                                :func:`toolkit_agreement` (rknn-toolkit2's own INT8 simulation)
the loop                        :func:`run`, :class:`PipelineRun`, :data:`STAGES`,
                                :func:`int8_channel0` (channel 0 of an output, read in
                                place), :func:`distinct_frames`, :func:`compare_modes`,
                                :func:`inputs_set_copies` (rknn_inputs_set copies),
                                :func:`show_table` (a table with units in its headers),
                                :func:`scaling`, :func:`steady_state`,
                                :class:`SteadyState` (``SteadyState.load`` reads a
                                recorded long run)
==============================  =====================================================

Figures: rknnlab.plot.pipeline_frames, pipeline_gantt, pipeline_scaling, pipeline_steady,
model_balance.
"""
from __future__ import annotations

import importlib
from typing import Any

# name -> submodule: imported on first use, so `import rknnlab.pipeline` stays cheap
_NAMES = {
    "Nv12Frame": "frames", "nv12_size": "frames", "rgb_size": "frames", "to_nv12": "frames",
    "nv12_to_rgb": "frames", "Camera": "frames", "Shot": "frames",
    "letterbox": "preprocess", "Letterbox": "preprocess", "rga_problems": "preprocess",
    "int8_threshold": "postprocess", "find_boxes": "postprocess", "Box": "postprocess",
    "find_boxes_float": "postprocess",
    "box_agreement": "accuracy", "Agreement": "accuracy", "reference_boxes": "accuracy", "iou": "accuracy",
    "fp32_probabilities": "accuracy", "toolkit_agreement": "accuracy",
    # the loop lives in pipeline/loop.py: a submodule named "run" would replace the function
    # pipeline.run with the module once anything imported it
    "run": "loop", "PipelineRun": "loop", "compare_modes": "loop", "STAGES": "loop", "Worker": "loop",
    "int8_channel0": "loop", "distinct_frames": "loop", "inputs_set_copies": "loop", "show_table": "loop",
    "verdict_words": "loop",
    "scaling": "workers",
    "steady_state": "steady", "SteadyState": "steady",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'rknnlab.pipeline' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_NAMES))
