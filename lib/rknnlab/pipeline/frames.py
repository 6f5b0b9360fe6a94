"""NV12 frames, as a camera or a video decoder delivers them, and a seeded camera.

**NV12** is a YUV 4:2:0 layout in one buffer: a Y (luma) plane of ``height_stride`` rows
of ``stride`` bytes, then one interleaved UV (chroma) plane of ``height_stride / 2`` rows
of ``stride`` bytes, where each row holds ``width / 2`` pairs ``U, V``. One UV pair
serves a 2 x 2 block of pixels, so a frame holds 1.5 bytes per pixel (RGB888 holds 3).
``stride`` and ``height_stride`` are the padded row length and row count a decoder
allocates (hardware often wants them aligned); the bytes past ``width`` and ``height``
are padding that nobody reads.

The colour conversion is BT.601 in limited ("video") range: Y in 16..235, U and V in
16..240. That is what cameras and hardware decoders deliver for standard-definition and
most embedded streams. A full-range (JPEG) frame would need other constants.

:class:`Camera` plays a seeded "camera" over the course's real images (``data/frames``):
shots that pan across a text page, zoom in on text, and cut hard to another image (one of
them without text). Frames land in a pool of NV12 buffers used in turn, as a decoder's
buffer pool does: a frame stays valid until the pool comes round to its buffer again.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np

#: the images in data/frames and whether the detector finds text in them: pans and zooms
#: show text, and the camera cuts to images without. "text" holds hand-drawn symbols on
#: tiles, which the fp32 detector does not take for text (it finds nothing there).
SOURCES: Dict[str, bool] = {"page": True, "text": False, "coffee": False, "rocket": False}

# BT.601 limited range, 8-bit fixed point (x 256): the integer form most software uses
# (e.g. the ITU-R BT.601 coefficients rounded as in libyuv), so to_nv12 and nv12_to_rgb
# are exact integer functions and give the same bytes on every machine.
_Y_RGB = (66, 129, 25)
_U_RGB = (-38, -74, 112)
_V_RGB = (112, -94, -18)
_Y_GAIN, _R_V, _G_U, _G_V, _B_U = 298, 409, -100, -208, 516


def _check_geometry(width: int, height: int, stride: Optional[int],
                    height_stride: Optional[int]) -> Tuple[int, int]:
    for name, value in (("width", width), ("height", height)):
        if not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"NV12 {name} must be a positive integer, got {value!r}")
        if value % 2:
            raise ValueError(f"NV12 {name} must be even (one UV pair covers 2 x 2 pixels), "
                             f"got {value}")
    stride = width if stride is None else stride
    height_stride = height if height_stride is None else height_stride
    if stride < width:
        raise ValueError(f"stride {stride} is smaller than the width {width}: a row would "
                         f"not fit (stride counts bytes per Y row, padding included)")
    if height_stride < height:
        raise ValueError(f"height_stride {height_stride} is smaller than the height {height}")
    if height_stride % 2:
        raise ValueError(f"height_stride must be even (the UV plane has height_stride / 2 "
                         f"rows), got {height_stride}")
    return int(stride), int(height_stride)


def nv12_size(width: int, height: int, stride: Optional[int] = None,
              height_stride: Optional[int] = None) -> int:
    """Bytes of one NV12 frame: ``stride * height_stride * 3 // 2``.

    The Y plane is ``stride * height_stride`` bytes and the UV plane half of that.
    ``stride`` defaults to ``width`` and ``height_stride`` to ``height``. A 1920 x 1080
    frame without padding is 3,110,400 bytes; a decoder that pads rows to 1088 makes it
    3,133,440 bytes.
    """
    stride, height_stride = _check_geometry(width, height, stride, height_stride)
    return stride * height_stride * 3 // 2


def rgb_size(width: int, height: int, w_stride: Optional[int] = None) -> int:
    """Bytes of an RGB888 image whose rows hold ``w_stride`` pixels: ``height * w_stride * 3``.

    ``w_stride`` (the padded row length in pixels, as the native attr's ``w_stride``
    gives it; 0 or None means the width) must be at least ``width``.
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"width and height must be positive, got {width} x {height}")
    w_stride = width if not w_stride else w_stride
    if w_stride < width:
        raise ValueError(f"w_stride {w_stride} is smaller than the width {width}")
    return height * w_stride * 3


@dataclass
class Nv12Frame:
    """One NV12 frame in a flat uint8 buffer (see the module's help for the layout).

    ``data`` is the whole buffer, padding included; ``index`` is the frame's number in
    its sequence. ``y`` and ``uv`` are views into ``data``: writing them writes the frame.
    """
    data: np.ndarray
    width: int
    height: int
    stride: int
    height_stride: int
    index: int = 0

    def __post_init__(self) -> None:
        self.stride, self.height_stride = _check_geometry(
            self.width, self.height, self.stride, self.height_stride)
        need = nv12_size(self.width, self.height, self.stride, self.height_stride)
        if not isinstance(self.data, np.ndarray) or self.data.dtype != np.uint8 \
                or self.data.ndim != 1:
            raise ValueError("Nv12Frame.data must be a 1-D uint8 numpy array (the whole buffer)")
        if self.data.size < need:
            raise ValueError(f"an NV12 frame of {self.width} x {self.height} with stride "
                             f"{self.stride} and height_stride {self.height_stride} needs "
                             f"{need:,} bytes; the buffer holds {self.data.size:,}")

    @property
    def nbytes(self) -> int:
        """The frame's size in bytes, padding included."""
        return nv12_size(self.width, self.height, self.stride, self.height_stride)

    @property
    def y(self) -> np.ndarray:
        """The luma plane without padding: a height x width view."""
        plane = self.data[:self.stride * self.height_stride].reshape(self.height_stride, self.stride)
        return plane[:self.height, :self.width]

    @property
    def uv(self) -> np.ndarray:
        """The chroma plane without padding: a (height/2) x (width/2) x 2 view (U, V)."""
        start = self.stride * self.height_stride
        plane = self.data[start:start + self.stride * self.height_stride // 2]
        rows = plane.reshape(self.height_stride // 2, self.stride)[:self.height // 2, :self.width]
        return rows.reshape(self.height // 2, self.width // 2, 2)

    def __repr__(self) -> str:
        return (f"Nv12Frame(#{self.index}, {self.width} x {self.height}, stride {self.stride}, "
                f"height_stride {self.height_stride}, {self.nbytes:,} B)")


def _rgb_image(rgb: np.ndarray) -> np.ndarray:
    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected an H x W x 3 uint8 RGB image, got {rgb.dtype} {rgb.shape}")
    return rgb


def to_nv12(rgb: np.ndarray, stride: Optional[int] = None,
            height_stride: Optional[int] = None, out: Optional[Nv12Frame] = None,
            index: int = 0) -> Nv12Frame:
    """Encode an H x W x 3 uint8 RGB image as NV12 (BT.601, limited range).

    Y is computed per pixel; U and V from the mean RGB of each 2 x 2 block (4:2:0
    subsampling, which is where most of the round-trip error comes from). Padding bytes
    (past the width or height) are set to 0 in a new frame. Pass ``out`` to write into
    an existing frame of the same width and height instead of allocating one.
    """
    rgb = _rgb_image(rgb)
    height, width = rgb.shape[:2]
    if out is None:
        stride, height_stride = _check_geometry(width, height, stride, height_stride)
        out = Nv12Frame(np.zeros(nv12_size(width, height, stride, height_stride), np.uint8),
                        width, height, stride, height_stride, index)
    elif (out.width, out.height) != (width, height):
        raise ValueError(f"out is {out.width} x {out.height}, the image {width} x {height}")
    # float32 holds these integer sums exactly (all below 2**24), and floor((x + 128) / 256)
    # equals the integer (x + 128) >> 8, so this is the fixed-point formula, run by BLAS
    values = rgb.astype(np.float32)
    y = values @ np.array(_Y_RGB, np.float32)
    y += 128
    y /= 256
    np.floor(y, out=y)
    y += 16
    out.y[...] = y
    # the mean of each 2 x 2 block, rounded: chroma is sampled once per block
    blocks = values.reshape(height // 2, 2, width // 2, 2, 3).sum(axis=(1, 3))
    blocks += 2
    blocks /= 4
    np.floor(blocks, out=blocks)
    uv = blocks @ np.array([_U_RGB, _V_RGB], np.float32).T
    uv += 128
    uv /= 256
    np.floor(uv, out=uv)
    uv += 128
    out.uv[...] = uv
    return out


def nv12_to_rgb(frame: Nv12Frame) -> np.ndarray:
    """Decode an NV12 frame (BT.601, limited range) into a new H x W x 3 uint8 RGB image.

    Each UV pair is used for its whole 2 x 2 block (nearest upsampling of chroma).
    """
    c = _Y_GAIN * (frame.y.astype(np.int32) - 16) + 128
    uv = frame.uv.astype(np.int32) - 128
    # repeat each chroma sample over its 2 x 2 block
    d = np.repeat(np.repeat(uv[..., 0], 2, axis=0), 2, axis=1)
    e = np.repeat(np.repeat(uv[..., 1], 2, axis=0), 2, axis=1)
    rgb = np.empty((frame.height, frame.width, 3), np.uint8)
    rgb[..., 0] = np.clip((c + _R_V * e) >> 8, 0, 255)
    rgb[..., 1] = np.clip((c + _G_U * d + _G_V * e) >> 8, 0, 255)
    rgb[..., 2] = np.clip((c + _B_U * d) >> 8, 0, 255)
    return rgb


# ---------------------------------------------------------------- the camera

@dataclass(frozen=True)
class Shot:
    """One shot of the camera: it starts at frame ``start`` and lasts ``length`` frames.

    ``kind`` is "pan" (a slow pan across a text page), "zoom" (a zoom in on text) or
    "cut" (a hard cut to another image, held still); ``source`` names the image and
    ``text`` says whether the detector finds text in it (see ``SOURCES``).
    """
    start: int
    kind: str
    source: str
    length: int = 0
    text: bool = True


def frames_dir() -> Path:
    """The directory of the course's source images (the repository's data/frames)."""
    from .. import paths
    accessor = getattr(paths, "frames_dir", None)
    return Path(accessor()) if accessor is not None else paths.data_dir() / "frames"


# scene oversampling: the scene holds SCENE_SCALE pixels per frame pixel, so a zoom up to
# x SCENE_SCALE still samples the scene at or below 1:1 (no blocky nearest upscaling)
SCENE_SCALE = 2
# the background around an image that does not fill the canvas (a dark desk)
_BACKGROUND = (38, 40, 44)
# luma noise: a standard deviation of about 1.5 levels, clipped to +-4, so a limited-range
# Y (16..235) plus noise never leaves 0..255 and uint8 wrap-around addition is exact
_NOISE_SIGMA = 1.5
_NOISE_MAX = 4


@functools.lru_cache(maxsize=8)
def _scene(path: str, mtime: float, width: int, height: int) -> Tuple[np.ndarray, np.ndarray]:
    """The image fitted into a canvas of SCENE_SCALE x the frame size, as a Y plane and
    a UV plane (uint16: one U, V pair per element). Built once per image (pillow's
    bilinear resize), then every frame is a gather from these planes."""
    from PIL import Image
    sw, sh = width * SCENE_SCALE, height * SCENE_SCALE
    image = Image.open(path).convert("RGB")
    fit = min(sw / image.width, sh / image.height)
    new_w, new_h = max(2, round(image.width * fit)), max(2, round(image.height * fit))
    canvas = np.empty((sh, sw, 3), np.uint8)
    canvas[...] = _BACKGROUND
    x, y = (sw - new_w) // 2, (sh - new_h) // 2
    canvas[y:y + new_h, x:x + new_w] = np.asarray(image.resize((new_w, new_h), Image.BILINEAR))
    frame = to_nv12(canvas)
    y_plane = np.ascontiguousarray(frame.y)
    uv_plane = np.ascontiguousarray(frame.uv).view(np.uint16)[..., 0]
    return y_plane, uv_plane


class Camera:
    """A seeded camera over real images: NV12 frames with pans, zooms and cuts.

    ``Camera(width=1280, height=720, seed=0, pool=24)`` plans ``length`` frames of shots
    from the images in ``directory`` (default: data/frames). ``.shots`` lists them;
    ``.frame(i)`` renders frame i and ``.frames(n)`` yields frames 0..n-1. After
    ``length`` frames the shots repeat, with fresh sensor noise.

    Each frame is rendered into one of ``pool`` NV12 buffers, used in turn (frame i goes
    to buffer i % pool), as a decoder's buffer pool works: hold a frame no longer than
    ``pool - 1`` further frames, or copy it. Rendering reuses those buffers and scratch
    arrays, so it allocates nothing proportional to the frame per call.

    The same seed gives the same shots and the same bytes, on every machine. Like a
    decoder, a camera renders one frame at a time: calls from several threads take turns.
    """

    def __init__(self, width: int = 1280, height: int = 720, seed: int = 0, pool: int = 24,
                 length: int = 300, directory: Union[str, Path, None] = None,
                 sources: Optional[Mapping[str, bool]] = None,
                 stride: Optional[int] = None, height_stride: Optional[int] = None) -> None:
        self.stride, self.height_stride = _check_geometry(width, height, stride, height_stride)
        if pool < 1:
            raise ValueError(f"pool must hold at least one buffer, got {pool}")
        if length < 1:
            raise ValueError(f"length must be at least one frame, got {length}")
        self.width, self.height, self.seed, self.length = width, height, seed, length
        directory = Path(directory) if directory is not None else frames_dir()
        if not directory.is_dir():
            raise FileNotFoundError(f"the frames directory {directory} does not exist: run "
                                    f"from a clone of the course (data/frames), or pass directory=")
        wanted = dict(SOURCES if sources is None else sources)
        found = {name: text for name, text in wanted.items() if (directory / f"{name}.png").is_file()}
        if not any(found.values()):
            raise FileNotFoundError(f"no image with text in {directory} (looked for "
                                    f"{', '.join(n + '.png' for n, t in wanted.items() if t)})")
        self.directory = directory
        self._paths = {name: str(directory / f"{name}.png") for name in found}
        self._text = found
        self.shots: List[Shot]
        self.shots, self._shot_params = self._plan(np.random.default_rng(seed))
        self._views = [self._view(i) for i in range(length)]
        size = nv12_size(width, height, self.stride, self.height_stride)
        self._pool = [np.zeros(size, np.uint8) for _ in range(pool)]
        self._noise = self._noise_bank(np.random.default_rng([seed, 1]))
        # scratch for the row gather of a zoomed view (rows of the widest scene)
        self._rows_y = np.empty((height, width * SCENE_SCALE), np.uint8)
        self._rows_uv = np.empty((height // 2, width // 2 * SCENE_SCALE), np.uint16)
        self._lock = threading.Lock()  # the scratch rows above serve one frame at a time

    # -- planning ---------------------------------------------------------------
    def _plan(self, rng: np.random.Generator) -> Tuple[List[Shot], List[Tuple[float, ...]]]:
        text = [n for n, t in self._text.items() if t]
        plain = [n for n, t in self._text.items() if not t]
        # open on a pan over text, then a zoom, then a cut (to an image without text if
        # there is one): every kind appears early; after that the kinds are seeded
        kinds = ["pan", "zoom", "cut"]
        shots: List[Shot] = []
        start, previous = 0, None
        while start < self.length:
            kind = kinds[len(shots)] if len(shots) < 3 else str(rng.choice(kinds))
            if kind == "cut":
                first_cut = not any(s.kind == "cut" for s in shots)
                candidates = plain if (plain and (first_cut or rng.random() < 0.5)) else text
                choices = [n for n in candidates if n != previous] or candidates
            else:
                choices = [n for n in text if n != previous] or text
            source = str(rng.choice(choices))
            length = min(int(rng.integers(40, 81)), self.length - start)
            shots.append(Shot(start, kind, source, length, self._text[source]))
            start, previous = start + length, source
        return shots, [self._params(s, rng) for s in shots]

    def _params(self, shot: Shot, rng: np.random.Generator) -> Tuple[float, ...]:
        # (cx0, cy0, zoom0, cx1, cy1, zoom1): the view's centre (fractions of the canvas)
        # and zoom at the shot's first and last frame; frames in between interpolate
        if shot.kind == "pan":
            zoom = float(rng.uniform(1.5, 1.8))
            half = 0.5 / zoom
            y = float(rng.uniform(0.4, 0.6))
            left, right = half, 1 - half
            return (left, y, zoom, right, y, zoom) if rng.random() < 0.5 else \
                (right, y, zoom, left, y, zoom)
        if shot.kind == "zoom":
            zoom = float(rng.uniform(1.6, float(SCENE_SCALE)))
            cx, cy = float(rng.uniform(0.4, 0.6)), float(rng.uniform(0.45, 0.55))
            return (0.5, 0.5, 1.0, cx, cy, zoom)
        return (0.5, 0.5, 1.0, 0.5, 0.5, 1.0)

    def _shot_at(self, i: int) -> int:
        position = i % self.length
        for k in range(len(self.shots) - 1, -1, -1):
            if self.shots[k].start <= position:
                return k
        return 0

    def shot_at(self, i: int) -> Shot:
        """The shot frame ``i`` belongs to."""
        return self.shots[self._shot_at(i)]

    def _view(self, i: int) -> Tuple[str, np.ndarray, np.ndarray]:
        """The source and the scene rows and columns frame i samples (nearest)."""
        k = self._shot_at(i)
        shot, (cx0, cy0, z0, cx1, cy1, z1) = self.shots[k], self._shot_params[k]
        t = 0.0 if shot.length <= 1 else (i % self.length - shot.start) / (shot.length - 1)
        # zoom changes geometrically, so the apparent speed of a zoom stays constant
        zoom = z0 * (z1 / z0) ** t
        cx, cy = cx0 + (cx1 - cx0) * t, cy0 + (cy1 - cy0) * t
        half_w, half_h = 0.5 / zoom, 0.5 / zoom
        # keep the window inside the canvas
        cx = min(max(cx, half_w), 1 - half_w)
        cy = min(max(cy, half_h), 1 - half_h)
        sw, sh = self.width * SCENE_SCALE, self.height * SCENE_SCALE
        cols = ((cx - half_w) + (np.arange(self.width) + 0.5) / self.width / zoom) * sw
        rows = ((cy - half_h) + (np.arange(self.height) + 0.5) / self.height / zoom) * sh
        cols = np.clip(cols.astype(np.intp), 0, sw - 1)
        rows = np.clip(rows.astype(np.intp), 0, sh - 1)
        return shot.source, rows, cols

    def _noise_bank(self, rng: np.random.Generator) -> np.ndarray:
        # one noise field a little larger than the frame; each frame reads it at a seeded
        # offset, so frames get different noise without drawing 1M random numbers each
        noise = np.rint(rng.normal(0, _NOISE_SIGMA, (self.height + 64, self.width + 64)))
        noise = np.clip(noise, -_NOISE_MAX, _NOISE_MAX).astype(np.int8)
        return noise.view(np.uint8)  # two's complement: adding 254 subtracts 2 (mod 256)

    # -- rendering --------------------------------------------------------------
    def __len__(self) -> int:
        return self.length

    def frame(self, i: int) -> Nv12Frame:
        """Render frame ``i`` into pool buffer ``i % pool`` and return it."""
        if i < 0:
            raise ValueError(f"frame numbers start at 0, got {i}")
        with self._lock:
            return self._render(i)

    def _render(self, i: int) -> Nv12Frame:
        source, rows, cols = self._views[i % self.length]
        scene_y, scene_uv = _scene(self._paths[source], Path(self._paths[source]).stat().st_mtime,
                                   self.width, self.height)
        frame = Nv12Frame(self._pool[i % len(self._pool)], self.width, self.height,
                          self.stride, self.height_stride, i)
        # rows first into scratch, then columns straight into the frame's planes
        rows_y = self._rows_y[:, :scene_y.shape[1]]
        np.take(scene_y, rows, axis=0, out=rows_y, mode="clip")
        np.take(rows_y, cols, axis=1, out=frame.y, mode="clip")
        rows_uv = self._rows_uv[:, :scene_uv.shape[1]]
        np.take(scene_uv, rows[::2] // 2, axis=0, out=rows_uv, mode="clip")
        uv16 = frame.uv.view(np.uint16)[..., 0] if self.stride % 2 == 0 else None
        if uv16 is not None:
            np.take(rows_uv, cols[::2] // 2, axis=1, out=uv16, mode="clip")
        else:  # an odd stride: the pairs are not 2-byte aligned, write U and V apart
            pairs = np.take(rows_uv, cols[::2] // 2, axis=1).view(np.uint8)
            frame.uv[...] = pairs.reshape(frame.uv.shape)
        rng = np.random.default_rng([self.seed, 2, i])
        dy, dx = (int(v) for v in rng.integers(0, 64, 2))
        y = frame.y
        np.add(y, self._noise[dy:dy + self.height, dx:dx + self.width], out=y)
        return frame

    def frames(self, n: int, start: int = 0) -> Iterator[Nv12Frame]:
        """Frames ``start`` .. ``start + n - 1``, each rendered when it is asked for."""
        for i in range(start, start + n):
            yield self.frame(i)

    def __repr__(self) -> str:
        kinds = ", ".join(f"{s.kind} {s.source}@{s.start}" for s in self.shots)
        return (f"Camera({self.width} x {self.height}, seed {self.seed}, pool "
                f"{len(self._pool)}, {self.length} frames: {kinds})")
