"""rknnlab.pipeline's frames, pre-processing, post-processing and accuracy (chapter 6)."""
from __future__ import annotations

import tracemalloc
from collections import deque

import numpy as np
import pytest

from rknnlab.pipeline.accuracy import (Agreement, box_agreement, fp32_probabilities, iou,
                                       reference_boxes, toolkit_agreement)
from rknnlab.pipeline.frames import (SOURCES, Camera, Nv12Frame, frames_dir, nv12_size,
                                     nv12_to_rgb, rgb_size, to_nv12)
from rknnlab.pipeline.postprocess import (Box, dequantize, find_boxes, find_boxes_float,
                                          int8_threshold)
from rknnlab.pipeline.preprocess import Letterbox, fit, letterbox, rga_problems

PPOCR_ZP, PPOCR_SCALE = -128, 0.0039215688593685627  # ppocr_det's output on rk3588


# ---------------------------------------------------------------- sizes and NV12

@pytest.mark.parametrize("args, expected", [
    ((1920, 1080), 3_110_400),                  # 1920 * 1080 * 1.5
    ((1920, 1080, 1920, 1088), 3_133_440),      # a decoder that pads to 1088 rows
    ((1280, 720, 1344), 1_451_520),             # 1344 * 720 * 1.5
    ((1280, 720, 1280, 736), 1_413_120),        # 1280 * 736 * 1.5
    ((2, 2), 6),
])
def test_nv12_size_by_hand(args, expected):
    assert nv12_size(*args) == expected


@pytest.mark.parametrize("args, expected", [
    ((480, 480), 691_200), ((480, 480, 496), 714_240), ((480, 480, 0), 691_200),
    ((1920, 1080), 6_220_800),
])
def test_rgb_size_by_hand(args, expected):
    assert rgb_size(*args) == expected


@pytest.mark.parametrize("args, words", [
    ((1281, 720), "even"), ((1280, 721), "even"), ((1280, 720, 1270), "stride"),
    ((1280, 720, None, 700), "height_stride"), ((1280, 720, None, 723), "even"),
    ((0, 720), "positive"),
])
def test_nv12_size_refuses_bad_geometry(args, words):
    with pytest.raises(ValueError, match=words):
        nv12_size(*args)


def test_rgb_size_refuses_a_short_stride():
    with pytest.raises(ValueError, match="w_stride"):
        rgb_size(480, 480, 470)


def test_planes_are_views_at_the_strides():
    width, height, stride, hstride = 6, 4, 10, 6
    data = np.arange(nv12_size(width, height, stride, hstride), dtype=np.uint64).astype(np.uint8)
    frame = Nv12Frame(data, width, height, stride, hstride)
    assert frame.nbytes == 90
    assert frame.y.shape == (4, 6) and frame.uv.shape == (2, 3, 2)
    for r in range(height):
        for c in range(width):
            assert frame.y[r, c] == data[r * stride + c]
    for r in range(height // 2):
        for c in range(width // 2):
            assert frame.uv[r, c, 0] == data[stride * hstride + r * stride + 2 * c]
            assert frame.uv[r, c, 1] == data[stride * hstride + r * stride + 2 * c + 1]
    frame.y[0, 0] = 200
    assert data[0] == 200  # a view, not a copy


def test_frame_refuses_a_short_buffer():
    with pytest.raises(ValueError, match="needs 1,382,400 bytes"):
        Nv12Frame(np.zeros(1_000_000, np.uint8), 1280, 720, 1280, 720)


@pytest.mark.parametrize("rgb, yuv", [((255, 255, 255), (235, 128, 128)), ((0, 0, 0), (16, 128, 128))])
def test_white_and_black_sit_at_the_ends_of_limited_range(rgb, yuv):
    frame = to_nv12(np.full((2, 2, 3), rgb, np.uint8))
    assert (int(frame.y[0, 0]), int(frame.uv[0, 0, 0]), int(frame.uv[0, 0, 1])) == yuv


def test_colours_follow_bt601_within_one_level():
    # BT.601's real-valued definition (limited range); the module's 8-bit fixed point
    # may round one level differently (pure green: 144.55 -> 144)
    colours = np.random.default_rng(3).integers(0, 256, (200, 3))
    colours = np.concatenate([colours, np.eye(3, dtype=int) * 255])
    for r, g, b in colours:
        frame = to_nv12(np.full((2, 2, 3), (r, g, b), np.uint8))
        y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
        u = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
        v = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
        got = (int(frame.y[0, 0]), int(frame.uv[0, 0, 0]), int(frame.uv[0, 0, 1]))
        assert np.abs(np.subtract(got, (y, u, v))).max() <= 1.0, ((r, g, b), got, (y, u, v))


def test_round_trip_error_is_small_on_a_smooth_image():
    yy, xx = np.mgrid[0:64, 0:96]
    rgb = np.stack([xx * 2 + 40, yy * 2 + 30, (xx + yy) + 50], axis=-1).astype(np.uint8)
    back = nv12_to_rgb(to_nv12(rgb, stride=112, height_stride=66))
    error = np.abs(back.astype(int) - rgb.astype(int))
    assert error.mean() < 1.5 and error.max() <= 4


def test_to_nv12_leaves_padding_zero_and_writes_into_out():
    rgb = np.full((4, 6, 3), 200, np.uint8)
    frame = to_nv12(rgb, stride=8, height_stride=6)
    rows = frame.data[:8 * 6].reshape(6, 8)
    assert (rows[:, 6:] == 0).all() and (rows[4:] == 0).all()
    again = to_nv12(np.zeros((4, 6, 3), np.uint8), out=frame)
    assert again is frame and (frame.y == 16).all()
    with pytest.raises(ValueError, match="out is 6 x 4"):
        to_nv12(np.zeros((6, 4, 3), np.uint8), out=frame)


# ---------------------------------------------------------------- the camera

@pytest.fixture(scope="module")
def camera():
    return Camera(seed=7, length=240, pool=4)


def test_camera_is_deterministic_in_any_order(camera):
    other = Camera(seed=7, length=240, pool=4)
    assert other.shots == camera.shots
    later = other.frame(150).data.copy()
    early = other.frame(3).data.copy()
    assert np.array_equal(camera.frame(3).data, early)
    assert np.array_equal(camera.frame(150).data, later)


def test_another_seed_gives_another_sequence(camera):
    other = Camera(seed=8, length=240, pool=4)
    assert other.shots != camera.shots or not np.array_equal(other.frame(10).data,
                                                             camera.frame(10).data)


def test_shots_cover_the_sequence_with_every_kind(camera):
    shots = camera.shots
    assert shots[0].start == 0
    assert all(a.start + a.length == b.start for a, b in zip(shots, shots[1:]))
    assert shots[-1].start + shots[-1].length == len(camera)
    assert {"pan", "zoom", "cut"} <= {s.kind for s in shots}
    first_cut = next(s for s in shots if s.kind == "cut")
    assert not first_cut.text  # the first cut goes to an image without text
    assert all(SOURCES[s.source] for s in shots if s.kind in ("pan", "zoom"))
    assert camera.shot_at(shots[1].start) == shots[1]
    assert camera.shot_at(shots[1].start - 1) == shots[0]


def test_frames_move_within_a_pan_and_carry_fresh_noise(camera):
    pan = next(s for s in camera.shots if s.kind == "pan")
    a = camera.frame(pan.start).y.astype(int)
    b = camera.frame(pan.start + 20).y.astype(int)
    assert np.abs(a - b).mean() > 5  # the view moved
    cut = next(s for s in camera.shots if s.kind == "cut")
    still = [camera.frame(cut.start + k).y.astype(int) for k in (1, 2)]
    difference = np.abs(still[0] - still[1])
    # a held shot: only the sensor noise changes, a few levels at most
    assert 0.3 < difference.mean() < 4 and difference.max() <= 8
    # the noise stays inside the limited range: no wrap-around to 0 or 255
    assert 12 <= camera.frame(cut.start).y.min() and camera.frame(cut.start).y.max() <= 240


def test_frames_come_from_a_pool_used_in_turn(camera):
    first = camera.frame(10)
    assert first.index == 10
    assert np.shares_memory(first.data, camera.frame(14).data)      # pool of 4
    assert not np.shares_memory(camera.frame(11).data, camera.frame(12).data)
    assert [f.index for f in camera.frames(3, start=5)] == [5, 6, 7]


def test_camera_renders_without_allocating_a_frame():
    cam = Camera(seed=3, length=120, pool=3)
    for shot in cam.shots:
        cam.frame(shot.start)                      # every scene built once
    tracemalloc.start()
    try:
        for i in range(0, 120, 7):
            cam.frame(i)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64_000, peak                     # a 1280 x 720 NV12 frame is 1.4 MB


def test_camera_with_strides_leaves_padding_alone():
    cam = Camera(width=64, height=36, stride=80, height_stride=40, seed=1, length=30, pool=2)
    frame = cam.frame(0)
    rows = frame.data[:80 * 40].reshape(40, 80)
    assert (rows[:, 64:] == 0).all() and (rows[36:] == 0).all()
    assert frame.y.std() > 0


@pytest.mark.parametrize("kwargs, error, words", [
    ({"width": 1279}, ValueError, "even"),
    ({"stride": 1000}, ValueError, "stride"),
    ({"pool": 0}, ValueError, "pool"),
    ({"directory": "/nonexistent/frames"}, FileNotFoundError, "does not exist"),
])
def test_camera_refuses_bad_input(kwargs, error, words):
    with pytest.raises(error, match=words):
        Camera(**kwargs)


def test_camera_needs_an_image_with_text(tmp_path):
    (tmp_path / "coffee.png").write_bytes((frames_dir() / "coffee.png").read_bytes())
    with pytest.raises(FileNotFoundError, match="no image with text"):
        Camera(directory=tmp_path)


# ---------------------------------------------------------------- letterbox

@pytest.mark.parametrize("frame_wh, expected", [
    ((1280, 720), Letterbox(0.375, 0, 105, 480, 270, 1280, 720)),
    ((720, 1280), Letterbox(0.375, 105, 0, 270, 480, 720, 1280)),
    ((1920, 1080), Letterbox(0.25, 0, 105, 480, 270, 1920, 1080)),
    ((480, 480), Letterbox(1.0, 0, 0, 480, 480, 480, 480)),
])
def test_fit_geometry(frame_wh, expected):
    assert fit(*frame_wh, 480, 480) == expected


def _frame(width, height, stride=None, height_stride=None, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    rgb = np.stack([(xx * 255) // width, (yy * 255) // height, (xx + yy) % 256], -1)
    rgb = np.clip(rgb + rng.integers(-20, 21, rgb.shape), 0, 255).astype(np.uint8)
    return to_nv12(rgb, stride, height_stride)


@pytest.mark.parametrize("frame_args, out_wh, w_stride", [
    ((1280, 720, 1296, 736), (480, 480), 496),
    ((720, 1280), (480, 480), None),
    ((640, 480, 656), (320, 192), 336),
])
def test_letterbox_matches_decode_then_nearest_and_writes_only_inside(frame_args, out_wh, w_stride):
    frame = _frame(*frame_args)
    width, height = out_wh
    pitch = w_stride or width
    guard = 4096
    dst = np.full(height * pitch * 3 + guard, 0xAB, np.uint8)
    box = letterbox(frame, dst, width, height, w_stride, pad=7)
    rows = dst[:height * pitch * 3].reshape(height, pitch, 3)
    assert (dst[height * pitch * 3:] == 0xAB).all()         # nothing past the last row
    assert (rows[:, width:] == 0xAB).all()                  # nor in the rows' padding
    inside = rows[box.pad_y:box.pad_y + box.new_h, box.pad_x:box.pad_x + box.new_w]
    outside = np.ones((height, width), bool)
    outside[box.pad_y:box.pad_y + box.new_h, box.pad_x:box.pad_x + box.new_w] = False
    assert (rows[:, :width][outside] == 7).all()
    # independently: decode the whole frame, then sample the nearest pixel
    rgb = nv12_to_rgb(frame)
    ys = np.minimum(((np.arange(box.new_h) + 0.5) / box.scale).astype(int), frame.height - 1)
    xs = np.minimum(((np.arange(box.new_w) + 0.5) / box.scale).astype(int), frame.width - 1)
    assert np.array_equal(inside, rgb[ys][:, xs])


def test_letterbox_maps_back_to_the_frame():
    box = fit(1280, 720, 480, 480)
    assert box.to_frame(box.pad_x, box.pad_y) == (0.0, 0.0)
    assert box.to_frame(box.pad_x + box.new_w, box.pad_y + box.new_h) == pytest.approx((1280, 720))
    assert box.to_frame(0, 0) == (0.0, 0.0)                 # the padding clips to the frame
    assert box.to_frame(*box.to_model(100.0, 200.0)) == pytest.approx((100.0, 200.0))


def test_letterbox_allocates_nothing_the_size_of_the_frame():
    frame = _frame(1280, 720)
    dst = np.zeros(480 * 480 * 3, np.uint8)
    letterbox(frame, dst, 480, 480)                         # tables and scratch made here
    tracemalloc.start()
    try:
        letterbox(frame, dst, 480, 480)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # one frame-sized array would be 1.4 MB, one output-sized plane 130 KB; numpy's
    # casting buffers (8,192 elements) stay below 64 KB
    assert peak < 64_000, peak


@pytest.mark.parametrize("dst, error", [
    (np.zeros(480 * 480 * 3 - 1, np.uint8), ValueError),
    (np.zeros(480 * 480 * 3, np.int8), TypeError),
    (np.zeros((480, 960, 3), np.uint8)[:, ::2], ValueError),
])
def test_letterbox_refuses_a_bad_destination(dst, error):
    with pytest.raises(error):
        letterbox(_frame(64, 36), dst, 480, 480)


# ---------------------------------------------------------------- RGA's rules

@pytest.mark.parametrize("args, kwargs", [
    (("RGB888", 480, 480), {}),
    (("RGB888", 500, 480), {"w_stride": 512}),
    (("NV12", 1920, 1080), {}),
    (("NV12", 1920, 1080), {"x": 2, "y": 4, "w": 640, "h": 360}),
    (("I420", 1280, 720), {}),
    (("RGB888", 480, 480), {"phys_above_4g": True}),        # RGA3 does this one
    (("RGB888", 480, 480), {"fill": True}),                 # RGA2, memory below 4 GiB
    (("NV12", 1920, 1080), {"height_stride": 1088}),        # a decoder's padded rows
    (("RGB888", 68, 2), {"w_stride": 80}),                  # RGA3's smallest input
    (("I420", 64, 48), {}),                                 # planar: RGA2's 2 x 2 minimum
    (("NV12", 1920, 1080), {"x": 0, "y": 0, "w": 2, "h": 2}),
])
def test_rga_accepts_what_the_rules_allow(args, kwargs):
    assert rga_problems(*args, **kwargs) == []


@pytest.mark.parametrize("args, kwargs, words", [
    (("RGB888", 500, 480), {}, "RGB888 width stride"),
    (("NV12", 1928, 1080), {}, "YUV420SP width stride"),
    (("NV12", 1920, 1080), {"x": 1, "w": 640}, "x = 1"),
    (("NV12", 1920, 1080), {"w": 639}, "width = 639"),
    (("NV12", 1920, 1080), {"y": 3, "h": 361}, "y = 3, height = 361"),
    (("I420", 1280, 720), {"phys_above_4g": True}, "YUV planar"),
    (("RGB888", 480, 480), {"fill": True, "phys_above_4g": True}, "imfill"),
    (("NV12", 1920, 1080), {"height_stride": 1081}, "height stride = 1081"),
    (("RGB888", 67, 2), {"w_stride": 80}, "at least 68 x 2"),
    (("NV12", 64, 720), {}, "at least 68 x 2"),
    (("RGB888", 480, 480), {"w": 1}, "at least 2 x 2"),
    (("I420", 1280, 720), {"w_stride": 1282}, "YUV420P width stride that is a multiple of 4"),
    (("I420", 1280, 720), {"y": 1, "h": 360}, "odd: y = 1"),
    (("YV12", 640, 480), {"height_stride": 483}, "height stride = 483"),
])
def test_rga_problems_name_the_rule_and_its_source(args, kwargs, words):
    problems = rga_problems(*args, **kwargs)
    assert len(problems) == 1 and words in problems[0]
    assert "Rockchip" in problems[0]


def test_rga_problems_lists_every_rule_broken():
    problems = rga_problems("NV12", 60, 41, w_stride=60, height_stride=43)
    assert len(problems) == 3, problems
    assert "68 x 2" in problems[0] and "multiple of 16" in problems[1]
    assert "odd: height = 41, height stride = 43" in problems[2]


def test_rga_problems_say_unknown_for_other_socs():
    problems = rga_problems("RGB888", 480, 480, soc="rk3568")
    assert len(problems) == 1 and problems[0].startswith("Unknown")


@pytest.mark.parametrize("args, kwargs", [
    (("BGRA", 480, 480), {}), (("NV12", 640, 480), {"x": 4, "w": 640}),
    (("RGB888", 480, 480), {"w_stride": 400}), (("NV12", 1920, 1080), {"height_stride": 1072}),
])
def test_rga_problems_refuse_bad_input(args, kwargs):
    with pytest.raises(ValueError):
        rga_problems(*args, **kwargs)


# ---------------------------------------------------------------- int8 threshold

def _brute_threshold(prob, zp, scale):
    passing = [q for q in range(-128, 128) if (q - zp) * scale >= prob]
    return min(passing) if passing else 127


@pytest.mark.parametrize("zp, scale", [
    (PPOCR_ZP, PPOCR_SCALE), (-14, 0.01865844801068306), (5, 0.1), (127, 0.003), (-128, 1 / 255),
])
def test_int8_threshold_is_exact_against_brute_force(zp, scale):
    values = [(q - zp) * scale for q in range(-128, 128)]
    probs = [0.3, 0.5, 0.0, 1.0, -1e6, 1e6] + values + [v + 1e-12 for v in values] \
        + [v - 1e-12 for v in values] + [float(np.nextafter(v, np.inf)) for v in values]
    for prob in probs:
        assert int8_threshold(prob, zp, scale) == _brute_threshold(prob, zp, scale), prob


def test_int8_threshold_edges():
    assert int8_threshold(-5.0, PPOCR_ZP, PPOCR_SCALE) == -128     # every value passes
    q = int8_threshold(2.0, PPOCR_ZP, PPOCR_SCALE)                 # no value reaches 2.0
    assert q == 127 and dequantize(q, PPOCR_ZP, PPOCR_SCALE) < 2.0
    assert int8_threshold(0.3, PPOCR_ZP, PPOCR_SCALE) == -51        # ceil(0.3 * 255) - 128
    with pytest.raises(ValueError):
        int8_threshold(0.3, 0, 0.0)
    # zp and scale as numpy scalars, as an attr or a .npz gives them
    assert int8_threshold(0.3, np.int8(-128), np.float32(PPOCR_SCALE)) == -51
    assert int8_threshold(2.0, np.int8(-128), np.float32(PPOCR_SCALE)) == 127


# ---------------------------------------------------------------- find_boxes

def _grown(x, y, w, h, ratio=1.6, limit=(10 ** 9, 10 ** 9)):
    d = w * h * ratio / (2 * (w + h))
    return (max(0, x - d), max(0, y - d), min(limit[0], x + w + d), min(limit[1], y + h + d))


def _map(shape, rects, background=-128):
    out = np.full(shape, background, np.int8)
    for x, y, w, h, value in rects:
        out[y:y + h, x:x + w] = value
    return out


def test_find_boxes_on_known_rectangles():
    out = _map((120, 200), [(30, 10, 60, 10, 100), (5, 50, 10, 10, 127), (150, 90, 40, 8, 60)])
    boxes = find_boxes(out, PPOCR_ZP, PPOCR_SCALE)
    assert len(boxes) == 3
    expected = [_grown(30, 10, 60, 10), _grown(5, 50, 10, 10), _grown(150, 90, 40, 8, limit=(200, 120))]
    for box, rect, value in zip(boxes, expected, (100, 127, 60)):
        assert (box.x0, box.y0, box.x1, box.y1) == pytest.approx(rect)
        assert box.score == pytest.approx((value - PPOCR_ZP) * PPOCR_SCALE)


def test_find_boxes_reads_a_strided_view_in_place():
    out = _map((96, 128), [(10, 10, 50, 12, 90), (70, 60, 40, 20, 120)])
    native = np.random.default_rng(0).integers(-128, 128, (1, 4, 96, 128, 16)).astype(np.int8)
    native[0, 0, :, :, 0] = out
    view = native[0, 0, :, :, 0]
    assert not view.flags.c_contiguous and np.shares_memory(view, native)
    assert find_boxes(view, PPOCR_ZP, PPOCR_SCALE) == find_boxes(out, PPOCR_ZP, PPOCR_SCALE)
    assert len(find_boxes(view, PPOCR_ZP, PPOCR_SCALE)) == 2


def test_threshold_and_box_threshold_act_in_the_int8_domain():
    q = int8_threshold(0.3, PPOCR_ZP, PPOCR_SCALE)
    at = _map((40, 60), [(5, 5, 20, 10, q)])
    below = _map((40, 60), [(5, 5, 20, 10, q - 1)])
    assert len(find_boxes(at, PPOCR_ZP, PPOCR_SCALE, box_thresh=0.0)) == 1
    assert find_boxes(below, PPOCR_ZP, PPOCR_SCALE, box_thresh=0.0) == []
    # a component whose mean is 0.4 passes box_thresh 0.35 and fails 0.45
    q4 = PPOCR_ZP + 102                                    # 102 / 255 = 0.4
    faint = _map((40, 60), [(5, 5, 20, 10, q4)])
    assert len(find_boxes(faint, PPOCR_ZP, PPOCR_SCALE, box_thresh=0.35)) == 1
    assert find_boxes(faint, PPOCR_ZP, PPOCR_SCALE, box_thresh=0.45) == []
    # a component thinner than min_size (3) is dropped, as DB drops it
    assert find_boxes(_map((40, 60), [(5, 5, 30, 2, 127)]), PPOCR_ZP, PPOCR_SCALE) == []
    # no int8 value reaches 2.0: no boxes, even on a saturated map
    assert find_boxes(np.full((10, 10), 127, np.int8), PPOCR_ZP, PPOCR_SCALE, thresh=2.0) == []


def test_components_join_diagonally_and_around_bends():
    diagonal = _map((40, 40), [(5, 5, 10, 10, 127), (15, 15, 10, 10, 127)])
    assert len(find_boxes(diagonal, PPOCR_ZP, PPOCR_SCALE, unclip_ratio=0)) == 1
    apart = _map((40, 40), [(5, 5, 10, 10, 127), (16, 15, 10, 10, 127)])
    assert len(find_boxes(apart, PPOCR_ZP, PPOCR_SCALE, unclip_ratio=0)) == 2
    # a U and a spiral: the two arms only meet many rows below their tops
    u = _map((50, 50), [(5, 5, 3, 35, 120), (30, 5, 3, 35, 120), (5, 38, 28, 2, 120)])
    boxes = find_boxes(u, PPOCR_ZP, PPOCR_SCALE, unclip_ratio=0)
    assert [(b.x0, b.y0, b.x1, b.y1) for b in boxes] == [(5, 5, 33, 40)]


def _bfs_components(mask):
    """Reference labelling (8-connectivity), pixel by pixel: bounding boxes and sizes."""
    seen = np.zeros_like(mask)
    found = []
    h, w = mask.shape
    for sy, sx in zip(*np.nonzero(mask)):
        if seen[sy, sx]:
            continue
        seen[sy, sx] = True
        queue, pixels = deque([(sy, sx)]), []
        while queue:
            y, x = queue.popleft()
            pixels.append((y, x))
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    ny, nx = y + dy, x + dx
                    if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                        seen[ny, nx] = True
                        queue.append((ny, nx))
        ys, xs = zip(*pixels)
        found.append((min(xs), min(ys), max(xs) + 1, max(ys) + 1))
    return sorted(found, key=lambda b: (b[1], b[0]))


@pytest.mark.parametrize("seed, density", [(0, 0.3), (1, 0.45), (2, 0.55), (3, 0.6)])
def test_labelling_agrees_with_a_pixel_by_pixel_search(seed, density):
    rng = np.random.default_rng(seed)
    out = np.where(rng.random((40, 50)) < density, 127, -128).astype(np.int8)
    boxes = find_boxes(out, PPOCR_ZP, PPOCR_SCALE, unclip_ratio=0, min_size=1)
    expected = _bfs_components(out >= 0)
    assert sorted((b.x0, b.y0, b.x1, b.y1) for b in boxes) == sorted(expected)


def test_find_boxes_maps_through_the_letterbox():
    box = fit(1280, 720, 480, 480)
    out = _map((480, 480), [(100, 200, 120, 20, 120)])
    (found,) = find_boxes(out, PPOCR_ZP, PPOCR_SCALE, letterbox=box)
    x0, y0, x1, y1 = _grown(100, 200, 120, 20)
    assert (found.x0, found.y0) == pytest.approx(box.to_frame(x0, y0))
    assert (found.x1, found.y1) == pytest.approx(box.to_frame(x1, y1))


def test_a_box_in_the_padding_maps_to_nothing():
    box = fit(1280, 720, 480, 480)                        # rows 0..104 are padding
    out = _map((480, 480), [(100, 20, 120, 20, 120)])
    assert len(find_boxes(out, PPOCR_ZP, PPOCR_SCALE)) == 1
    assert find_boxes(out, PPOCR_ZP, PPOCR_SCALE, letterbox=box) == []


def test_float_route_finds_the_same_boxes():
    rng = np.random.default_rng(5)
    out = _map((80, 120), [(10, 10, 50, 12, 90), (70, 40, 40, 20, 120)])
    out[rng.random(out.shape) < 0.02] = 100
    prob = (out.astype(np.float64) - PPOCR_ZP) * PPOCR_SCALE
    ints, floats = find_boxes(out, PPOCR_ZP, PPOCR_SCALE), find_boxes_float(prob)
    assert len(ints) == len(floats) == 2
    for a, b in zip(ints, floats):
        assert (a.x0, a.y0, a.x1, a.y1, a.score) == pytest.approx((b.x0, b.y0, b.x1, b.y1, b.score))


# find_boxes as it was before its scratch buffers (issue 15): a boolean mask, a padded
# int8 copy, np.diff, values[mask] widened to int64, all made per call.  Kept as the
# reference its results must equal; the labelling (_label_runs) is unchanged and checked
# against a pixel-by-pixel search above.
def _boxes_before(values_map, mask, to_prob, letterbox=None, box_thresh=0.5, unclip_ratio=1.6,
                  min_size=3):
    from rknnlab.pipeline.postprocess import _label_runs
    h, w = mask.shape
    padded = np.zeros((h, w + 2), np.int8)
    padded[:, 1:-1] = mask
    edges = np.diff(padded, axis=1)
    rows, starts = np.nonzero(edges == 1)
    _, ends = np.nonzero(edges == -1)
    if rows.size == 0:
        return []
    label = np.unique(_label_runs(rows, starts, ends, w), return_inverse=True)[1]
    k = label.max() + 1
    lengths = ends - starts
    area = np.bincount(label, weights=lengths, minlength=k)
    values = values_map[mask]
    values = values.astype(np.int64 if values.dtype.kind in "iu" else np.float64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    sums = np.bincount(label, weights=np.add.reduceat(values, offsets), minlength=k)
    x0, x1 = np.full(k, w, np.int64), np.zeros(k, np.int64)
    y0, y1 = np.full(k, h, np.int64), np.zeros(k, np.int64)
    np.minimum.at(x0, label, starts)
    np.maximum.at(x1, label, ends)
    np.minimum.at(y0, label, rows)
    np.maximum.at(y1, label, rows + 1)
    bw, bh = (x1 - x0).astype(np.float64), (y1 - y0).astype(np.float64)
    score = to_prob(sums / area)
    keep = (np.minimum(bw, bh) >= min_size) & (score >= box_thresh)
    bw, bh, score = bw[keep], bh[keep], score[keep]
    d = bw * bh * unclip_ratio / (2.0 * (bw + bh))
    corners = zip(np.maximum(0.0, x0[keep] - d), np.maximum(0.0, y0[keep] - d),
                  np.minimum(float(w), x1[keep] + d), np.minimum(float(h), y1[keep] + d))
    boxes = []
    for (a, b, c, e), s in zip(corners, score):
        a, b, c, e = float(a), float(b), float(c), float(e)
        if letterbox is not None:
            (a, b), (c, e) = letterbox.to_frame(a, b), letterbox.to_frame(c, e)
            if c <= a or e <= b:
                continue
        boxes.append(Box(a, b, c, e, float(s)))
    return sorted(boxes, key=lambda b: (b.y0, b.x0))


def _int8_before(out, zp=PPOCR_ZP, scale=PPOCR_SCALE, letterbox=None, **kwargs):
    q = int8_threshold(0.3, zp, scale)
    return _boxes_before(out, out >= q, lambda mean: (mean - zp) * scale, letterbox, **kwargs)


def _toolkit_maps():
    """The int8 maps rknn-toolkit2 computed for ppocr_det (page views, text, coffee, rocket)."""
    from rknnlab import models
    with np.load(models.models_dir() / "ppocr_det" / "toolkit_int8.npz", allow_pickle=False) as data:
        return {str(name): m for name, m in zip(data["names"], data["int8"])}


def _text_lines(seed=0, noise=0.0, words=False):
    """A 480 x 480 map shaped like a page's: DB marks a line as one blob (``words``: with
    gaps between words, many more runs), a faint rim above it; optional speckle."""
    rng = np.random.default_rng(seed)
    out = np.full((480, 480), -128, np.int8)
    for y in range(40, 440, 36):
        x, end = int(rng.integers(10, 60)), int(rng.integers(300, 470))
        while x < end:
            word = min(int(rng.integers(20, 90)), end - x) if words else end - x
            out[y:y + 14, x:x + word] = rng.integers(60, 127)
            out[y - 2:y, x + 3:max(x + 4, x + word - 3)] = -40
            x += word + int(rng.integers(6, 30))
    out[rng.random(out.shape) < noise] = 100
    return out


def _in_native(out):
    """``out`` as channel 0 of a (1, 4, H, W, 16) NC1HWC2 buffer (a strided view)."""
    native = np.random.default_rng(1).integers(-128, 128, (1, 4) + out.shape + (16,)).astype(np.int8)
    native[0, 0, :, :, 0] = out
    return native[0, 0, :, :, 0]


def _maps_to_compare():
    maps = dict(_toolkit_maps())
    for seed, noise in ((0, 0.0), (1, 0.002), (2, 0.02), (3, 0.1)):
        maps[f"lines seed {seed} noise {noise}"] = _text_lines(seed, noise)
        maps[f"words seed {seed} noise {noise}"] = _text_lines(seed, noise, words=True)
    maps["random 45 %"] = np.where(np.random.default_rng(4).random((480, 480)) < 0.45, 127,
                                   -128).astype(np.int8)
    maps["saturated"] = np.full((480, 480), 127, np.int8)
    maps["last pixel only"] = np.full((480, 480), -128, np.int8)
    maps["last pixel only"][-3:, -3:] = 127
    maps["odd shape"] = _text_lines(5, 0.01, words=True)[:301, 7:450]
    return maps


def test_find_boxes_equals_the_implementation_before_its_scratch_buffers():
    box = fit(1280, 720, 480, 480)
    for name, out in _maps_to_compare().items():
        before = _int8_before(out)
        assert find_boxes(out, PPOCR_ZP, PPOCR_SCALE) == before, name
        assert find_boxes(_in_native(out), PPOCR_ZP, PPOCR_SCALE) == before, name
        assert find_boxes(out, PPOCR_ZP, PPOCR_SCALE, letterbox=box, min_size=1) \
            == _int8_before(out, letterbox=box, min_size=1), name
        # the float route on the dequantised map (float32, as want_float = 1 delivers it)
        prob = ((out.astype(np.float32) - PPOCR_ZP) * np.float32(PPOCR_SCALE)).astype(np.float32)
        assert find_boxes_float(prob) == _boxes_before(prob, prob >= 0.3, lambda mean: mean), name
    assert len(_int8_before(_toolkit_maps()["page"])) >= 3          # the comparison has boxes


def _peak(f, *args):
    f(*args)                                                  # warm-up: scratch made here
    tracemalloc.start()
    try:
        result = f(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _n_runs(out):
    mask = out >= int8_threshold(0.3, PPOCR_ZP, PPOCR_SCALE)
    return int(mask[:, 0].sum() + (mask[:, 1:] & ~mask[:, :-1]).sum())


def test_find_boxes_allocates_nothing_the_size_of_the_map():
    """D3: after a warm-up call (scratch made per thread and shape), one call's tracemalloc
    PEAK on a text map stays below 64 KiB, far below one 480 x 480 map (230,400 B as
    int8): only arrays sized by the runs of text it finds.  The implementation before the
    scratch buffers peaks near 0.9 MB."""
    page = _toolkit_maps()["page"]
    for name, out in (("page", page), ("page in NC1HWC2", _in_native(page)),
                      ("text lines", _text_lines(0)), ("text lines in NC1HWC2", _in_native(_text_lines(0))),
                      ("empty map", np.full((480, 480), -128, np.int8))):
        boxes, peak = _peak(find_boxes, out, PPOCR_ZP, PPOCR_SCALE)
        assert boxes == _int8_before(out)
        assert peak < 64 * 1024, (name, peak)
    # sized by runs, not pixels: a saturated map (230,400 text pixels in 480 runs) and
    # speckled ones (thousands of runs) stay within a fixed part plus 200 B per run
    for name, out in (("saturated", np.full((480, 480), 127, np.int8)),
                      ("words", _text_lines(1, words=True)), ("speckled", _text_lines(2, 0.02))):
        _, peak = _peak(find_boxes, out, PPOCR_ZP, PPOCR_SCALE)
        assert peak < 24 * 1024 + 200 * _n_runs(out), (name, peak, _n_runs(out))
    # the instrument sees per-call temporaries: the implementation before them fails
    _, peak_before = _peak(_int8_before, page)
    assert peak_before > 230_400, peak_before


def test_find_boxes_from_several_threads_at_once():
    """The scratch is per thread: workers that post-process at the same time must not
    share it (numpy releases the GIL inside its loops)."""
    from concurrent.futures import ThreadPoolExecutor
    maps = [_text_lines(seed, 0.01, words=seed % 2) for seed in range(4)] + [_in_native(_text_lines(9))]
    expected = [find_boxes(m, PPOCR_ZP, PPOCR_SCALE) for m in maps]

    def many(i):
        return all(find_boxes(maps[i], PPOCR_ZP, PPOCR_SCALE) == expected[i] for _ in range(15))

    with ThreadPoolExecutor(len(maps)) as pool:
        assert all(pool.map(many, range(len(maps))))
    # and a shape change in one thread gives that thread new scratch, right results
    assert find_boxes(maps[0][:100, :200], PPOCR_ZP, PPOCR_SCALE) == _int8_before(maps[0][:100, :200])
    assert find_boxes(maps[0], PPOCR_ZP, PPOCR_SCALE) == expected[0]


@pytest.mark.parametrize("bad", [np.zeros((10, 10), np.uint8), np.zeros((1, 10, 10), np.int8),
                                 np.zeros((10, 10), np.float32)])
def test_find_boxes_refuses_what_is_not_an_int8_map(bad):
    with pytest.raises(ValueError, match="int8"):
        find_boxes(bad, PPOCR_ZP, PPOCR_SCALE)


# ---------------------------------------------------------------- agreement

def test_iou_by_hand():
    assert iou(Box(0, 0, 10, 10, 1), Box(5, 0, 15, 10, 1)) == pytest.approx(50 / 150)
    assert iou(Box(0, 0, 10, 10, 1), Box(10, 0, 20, 10, 1)) == 0.0


def test_box_agreement_counts():
    ref = [Box(0, 0, 10, 10, 1), Box(20, 0, 30, 10, 1), Box(40, 0, 50, 10, 1)]
    same = box_agreement(ref, ref)
    assert (same.matched, same.precision, same.recall, same.f1) == (3, 1.0, 1.0, 1.0)
    # one box moved by 5 (IoU 1/3), one extra box: 2 of 4 boxes match 2 of 3 references
    boxes = [Box(0, 0, 10, 10, 1), Box(25, 0, 35, 10, 1), Box(40, 0, 50, 10, 1), Box(60, 0, 70, 10, 1)]
    a = box_agreement(boxes, ref)
    assert (a.matched, a.n, a.n_ref) == (2, 4, 3)
    assert (a.precision, a.recall, a.f1) == pytest.approx((0.5, 2 / 3, 4 / 7))
    assert box_agreement(boxes, ref, iou=0.3).matched == 3
    assert "2 of 4 boxes" in str(a) and "F1 0.57" in str(a)


def test_box_agreement_is_one_to_one():
    ref = [Box(0, 0, 10, 10, 1)]
    twins = [Box(0, 0, 10, 10, 1), Box(0, 0, 10, 11, 1)]
    a = box_agreement(twins, ref)
    assert a.matched == 1 and a.pairs[0][:2] == (0, 0)
    assert box_agreement(ref, twins).matched == 1


def test_box_agreement_on_empty_sets():
    assert box_agreement([], []) == Agreement(0, 0, 0, 1.0, 1.0, 1.0, 0.5, ())
    missed = box_agreement([], [Box(0, 0, 1, 1, 1)])
    assert (missed.precision, missed.recall, missed.f1) == (1.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        box_agreement([], [], iou=0)


# ---------------------------------------------------------------- the fp32 twin

def test_int8_boxes_of_a_camera_frame_agree_with_the_fp32_twin(camera):
    pan = next(s for s in camera.shots if s.kind == "pan")
    frame = camera.frame(pan.start + 10)
    reference = reference_boxes(frame)
    assert len(reference) >= 3                                    # a page has text lines
    assert all(0 <= b.x0 < b.x1 <= 1280 and 0 <= b.y0 < b.y1 <= 720 for b in reference)
    # the twin's map quantised as the NPU's output is, then the int8 route
    rgb = np.empty((480, 480, 3), np.uint8)
    box = letterbox(frame, rgb, 480, 480)
    prob = fp32_probabilities(rgb)
    out = np.clip(np.rint(prob / PPOCR_SCALE) + PPOCR_ZP, -128, 127).astype(np.int8)
    agreement = box_agreement(find_boxes(out, PPOCR_ZP, PPOCR_SCALE, box), reference)
    assert agreement.f1 >= 0.9, agreement


def test_reference_normalises_as_the_compiled_model_does():
    frame = _frame(1280, 720)
    rgb = np.empty((480, 480, 3), np.uint8)
    letterbox(frame, rgb, 480, 480)
    from rknnlab import models
    build = models.load_report("ppocr_det").data["build"]
    assert build["mean_values"] == [123.675, 116.28, 103.53]
    # a plain grey page without text: the twin finds (almost) nothing
    blank = np.full((480, 480, 3), 200, np.uint8)
    assert (fp32_probabilities(blank) >= 0.3).mean() < 0.01


def test_toolkit_simulation_agrees_on_the_page_views():
    table = toolkit_agreement()
    assert table.attrs["source"].startswith("rknn-toolkit2")
    page = table[table.index.str.startswith("page")]
    assert len(page) >= 1 and (page["reference"] > 0).all()
    assert page["f1"].mean() >= 0.8
    empty = table[(table["boxes"] == 0) & (table["reference"] == 0)]
    assert len(empty) >= 1 and empty[["precision", "recall", "f1"]].isna().all().all()  # text, rocket
