"""rknnlab.sim.layout and rknnlab.sim.model: formats, strides, quantization, and
every compiler report read the way the simulated runtime reads it."""
from __future__ import annotations

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi
from rknnlab.sim.layout import (InputQuantizer, LayoutError, dequantize, layout_for, logical_shape,
                                quantize)
from rknnlab.sim.model import SimModel


def _attr(fmt: int, dims, w_stride: int = 0) -> abi.rknn_tensor_attr:
    attr = abi.rknn_tensor_attr(fmt=fmt, n_dims=len(dims), w_stride=w_stride)
    for i, d in enumerate(dims):
        attr.dims[i] = d
    return attr


def test_logical_shape_is_nchw_for_4d_nhwc():
    assert logical_shape(_attr(abi.RKNN_TENSOR_NHWC, [1, 224, 224, 3])) == (1, 3, 224, 224)
    assert logical_shape(_attr(abi.RKNN_TENSOR_NCHW, [1, 255, 80, 80])) == (1, 255, 80, 80)
    assert logical_shape(_attr(abi.RKNN_TENSOR_UNDEFINED, [1, 1000])) == (1, 1000)


def test_nhwc_with_w_stride_pads_rows():
    logical = (1, 2, 3, 4)  # N C H W
    layout = layout_for(abi.RKNN_TENSOR_NHWC, abi.RKNN_TENSOR_INT8, logical,
                        _attr(abi.RKNN_TENSOR_NHWC, [1, 3, 4, 2], w_stride=6))
    assert layout.nbytes == 1 * 3 * 6 * 2
    value = np.arange(24, dtype=np.int8).reshape(logical)
    raw = np.full(layout.nbytes, 99, np.uint8)
    layout.write(value, raw)
    rows = raw.view(np.int8).reshape(1, 3, 6, 2)
    assert (rows[:, :, :4, :] == value.transpose(0, 2, 3, 1)).all()
    assert (rows[:, :, 4:, :] == 99).all()  # padding pixels untouched
    assert (layout.read(raw) == value).all()


@pytest.mark.parametrize("channels,c1,c2", [(255, 16, 16), (255, 34, 8), (3, 1, 16), (1, 2, 1), (32, 2, 16)])
def test_nc1hwc2_round_trip_and_padding(channels, c1, c2):
    logical = (1, channels, 3, 5)
    layout = layout_for(abi.RKNN_TENSOR_NC1HWC2, abi.RKNN_TENSOR_INT8, logical,
                        _attr(abi.RKNN_TENSOR_NC1HWC2, [1, c1, 3, 5, c2]))
    assert layout.nbytes == c1 * 3 * 5 * c2
    value = np.random.default_rng(channels).integers(-128, 128, logical, dtype=np.int8)
    raw = np.full(layout.nbytes, 7, np.uint8)
    layout.write(value, raw)
    blocks = raw.view(np.int8).reshape(1, c1, 3, 5, c2)
    # element (n, c, h, w) lives at [n, c // C2, h, w, c % C2]
    c = channels - 1
    assert blocks[0, c // c2, 2, 4, c % c2] == value[0, c, 2, 4]
    padded = blocks.transpose(0, 1, 4, 2, 3).reshape(1, c1 * c2, 3, 5)[:, channels:]
    assert (padded == 0).all()
    assert (layout.read(raw) == value).all()


def test_nc1hwc2_that_cannot_hold_the_channels_is_refused():
    with pytest.raises(LayoutError):
        layout_for(abi.RKNN_TENSOR_NC1HWC2, abi.RKNN_TENSOR_INT8, (1, 40, 2, 2),
                   _attr(abi.RKNN_TENSOR_NC1HWC2, [1, 2, 2, 2, 16]))


def test_quantize_dequantize():
    q = quantize(np.array([-1.0, 0.0, 0.26, 100.0]), zp=-3, scale=0.5)
    assert q.dtype == np.int8
    assert q.tolist() == [-5, -3, -2, 127]
    assert dequantize(q, -3, 0.5).tolist() == [-1.0, 0.0, 0.5, 65.0]


def test_input_quantizer_tables_equal_the_arithmetic():
    quantizer = InputQuantizer([123.675, 116.28, 103.53], [58.395, 57.12, 57.375], -14, 0.0186584,
                               (1, 3, 4, 4))
    pixels = np.random.default_rng(1).integers(0, 256, (1, 3, 4, 4), dtype=np.uint8)
    by_table = quantizer(pixels)
    by_arithmetic = quantizer(pixels.astype(np.float32))
    assert (by_table == by_arithmetic).all()
    expected = np.clip(np.rint((pixels[0, 1] - 116.28) / 57.12 / 0.0186584) - 14, -128, 127)
    assert np.abs(by_table[0, 1].astype(int) - expected).max() <= 1
    small = pixels // 2  # int8-representable: INT8 input means the same raw values
    assert (quantizer(small.astype(np.int8)) == quantizer(small)).all()


@pytest.mark.parametrize("name,soc", [(n, s) for n in models.list_models() for s in models.model_socs(n)])
def test_every_report_loads_with_consistent_native_sizes(name, soc):
    report = models.load_report(name, soc)
    model = SimModel(report, report.rknn_sha256)
    for spec in model.inputs + model.outputs:
        native = spec.attrs["native"]
        assert spec.native.nbytes == (native.size_with_stride or native.size)
        assert spec.native.n_elems == spec.plain.n_elems
    assert model.npu_cycles > 0


@pytest.mark.parametrize("n,channels,c1,c2", [(2, 20, 2, 16), (2, 1, 4, 16), (3, 16, 1, 16), (1, 1, 4, 16)])
def test_nc1hwc2_read_gathers_only_the_channels_of_every_batch_element(n, channels, c1, c2):
    logical = (n, channels, 3, 5)
    layout = layout_for(abi.RKNN_TENSOR_NC1HWC2, abi.RKNN_TENSOR_INT8, logical,
                        _attr(abi.RKNN_TENSOR_NC1HWC2, [n, c1, 3, 5, c2]))
    blocks = np.random.default_rng(n * channels).integers(-128, 128, (n, c1, 3, 5, c2), dtype=np.int8)
    got = layout.read(blocks.view(np.uint8).reshape(-1))
    expected = blocks.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c2, 3, 5)[:, :channels]
    assert got.shape == logical and (got == expected).all()
    # whole padding blocks at the end (batch of one) are left out of the data layout
    assert layout.data.nbytes == (-(-channels // c2) * 15 * c2 if n == 1 else layout.nbytes)
