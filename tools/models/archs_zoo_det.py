"""Three detectors of the RKNN model zoo, written out in plain PyTorch, with the zoo's heads.

The zoo publishes single-core FPS for these models; the simulator's timing law is fitted on
them, so each class rebuilds the graph the zoo compiles: the published architecture (layer
for layer, channel for channel) with the zoo's own head cut (its README, "the model provided
here is an optimized model").  Weights are seeded-random: compile cycles do not depend on
weight values.  No torchvision, no ultralytics: each definition below is written from:

* ``YOLOv6n``: meituan/YOLOv6 v3.0, configs/yolov6n.py (depth 0.33, width 0.25):
  EfficientRep backbone (fuse_P2, SimCSPSPPF), RepBiFPANNeck (BiFusion: a 2x2 stride-2
  ConvTranspose up, a 3x3 stride-2 conv down), EffiDeHead without DFL (use_dfl=False,
  reg_max=0).  RepVGG blocks are written as one 3x3 conv + BatchNorm + ReLU: in eval mode the
  ONNX export folds the BatchNorm into the conv, which is exactly the deploy (re-parameterised)
  block, a plain 3x3 conv with bias and ReLU.  Zoo export (airockchip/yolov6): per scale the
  reg conv (1x4xHxW), the cls conv after its sigmoid (1x80xHxW) and ReduceSum+Clip of those
  scores (1x1xHxW).
* ``YOLOv8n``: Ultralytics yolov8.yaml at scale n (depth 0.33, width 0.25, max_channels 1024):
  C2f, SPPF, SiLU, decoupled Detect head (box branch 64 channels = 4 x reg_max 16, class
  branch max(64, 80) = 80).  Zoo export (airockchip/ultralytics_yolov8): DFL and decoding
  removed; per scale the box conv (1x64xHxW), the class conv after its sigmoid (1x80xHxW) and
  ReduceSum+Clip (1x1xHxW).
* ``YOLOXs``: Megvii YOLOX-S (depth 0.33, width 0.50): CSPDarknet with the Focus stem,
  SPPBottleneck (5, 9, 13), SiLU, YOLOPAFPN, YOLOXHead (1x1 stems to 128 channels, two 3x3
  convs per branch, reg/obj/cls preds).  Zoo export (airockchip/YOLOX): the three head
  Concats [reg, sigmoid(obj), sigmoid(cls)] are the outputs (1x85xHxW), decoding removed.

Where the sigmoids sit comes from the zoo's Python post-processing (examples/<model>/python):
it reads the class scores (and YOLOX's objectness) as probabilities and never applies a
sigmoid, so they are inside the graph; it applies DFL (YOLOv8) and exp/grid (YOLOX) itself.

The zoo's convert.py normalises the input with mean 0 and std 255 for YOLOv6 and YOLOv8,
and mean 0, std 1 for YOLOX (which takes 0..255 pixels).  Input names follow the zoo's ONNX
files (INPUT_NAMES); OUTPUT_NAMES names each model's outputs in the zoo's order (the zoo's
own, mostly numeric, names are in ZOO_ONNX_OUTPUT_NAMES).

``python archs_zoo_det.py [outdir]`` builds each model, counts parameters and conv GFLOPs at
640x640 and compares them with the published figures, then exports each to ONNX (opset 12)
and prints its outputs.  What it finds, and why the small gaps:

* YOLOv6n 4,646,940 parameters folded (published 4.7M), 11.32 GFLOPs (11.4): YOLOv6 counts
  with thop, which charges a ConvTranspose per output pixel, 4x the real multiply-adds of
  the two 2x2 stride-2 upsamplers counted here per input pixel; with thop's rule, 11.39.
  The zoo's cut removes no weights (n has no DFL).
* YOLOv8n 3,157,184 parameters as built (Ultralytics' unfused count 3,157,200: the 16 are
  the fixed DFL conv the zoo's cut moves to post-processing), 8.74 GFLOPs (8.7); the DFL
  conv it drops is 0.5 M multiply-adds (0.001 GFLOPs).
* YOLOX-s 8,968,255 parameters (9.0M), 26.69 GFLOPs (26.8: thop also charges BatchNorm);
  the zoo's cut drops only reshapes, the grid decode and a transpose: no weights, no convs.
"""
from __future__ import annotations

import torch
from torch import nn

from archs import _SPPF  # the same SPPF as YOLOv5 v6+ (SiLU here)

INPUT_NAMES = {"YOLOv6n": "image_arrays", "YOLOv8n": "images", "YOLOXs": "images"}

# per scale (80x80, 40x40, 20x20): box, class scores, clipped score sum; YOLOX: one tensor per scale
OUTPUT_NAMES = {
    "YOLOv6n": [f"{kind}{i}" for i in range(3) for kind in ("box", "cls", "score_sum")],
    "YOLOv8n": [f"{kind}{i}" for i in range(3) for kind in ("box", "cls", "score_sum")],
    "YOLOXs": ["output0", "output1", "output2"],
}

# what the zoo's own ONNX files call the same outputs (its README's output tables); the
# TorchScript exporter refuses purely numeric names, hence OUTPUT_NAMES for the exports here
ZOO_ONNX_OUTPUT_NAMES = {
    "YOLOv6n": ["outputs", "onnx::ReduceSum_282", "287",
                "294", "onnx::ReduceSum_299", "303",
                "310", "onnx::ReduceSum_315", "319"],
    "YOLOv8n": ["318", "onnx::ReduceSum_326", "331",
                "338", "onnx::ReduceSum_346", "350",
                "357", "onnx::ReduceSum_365", "369"],
    "YOLOXs": ["output", "788", "output.1"],
}


class _ConvBNAct(nn.Sequential):
    """Conv (no bias) + BatchNorm + activation; the export folds the BatchNorm into the conv."""

    def __init__(self, c_in: int, c_out: int, kernel: int = 1, stride: int = 1, act: type = nn.SiLU,
                 eps: float = 1e-5):
        super().__init__(
            nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False),
            nn.BatchNorm2d(c_out, eps=eps),
            act(),
        )


def _score_sum(cls: torch.Tensor) -> torch.Tensor:
    # the zoo's added branch: the sum of the class scores, clipped, lets the C post-processing
    # skip a grid cell without reading its 80 scores
    return torch.clamp(cls.sum(1, keepdim=True), 0, 1)


# -- YOLOv6 v3.0 nano (meituan/YOLOv6 configs/yolov6n.py) --------------------------------

def _rep(c_in: int, c_out: int, stride: int = 1) -> nn.Module:
    """A RepVGG block in its deploy form: one 3x3 conv (+ folded BN) + ReLU."""
    return _ConvBNAct(c_in, c_out, 3, stride, nn.ReLU)


def _rep_block(c_in: int, c_out: int, n: int) -> nn.Sequential:
    return nn.Sequential(_rep(c_in, c_out), *(_rep(c_out, c_out) for _ in range(n - 1)))


class _SimCSPSPPF(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        hidden = c_out // 2
        self.cv1 = _ConvBNAct(c_in, hidden, 1, act=nn.ReLU)
        self.cv2 = _ConvBNAct(c_in, hidden, 1, act=nn.ReLU)
        self.cv3 = _ConvBNAct(hidden, hidden, 3, act=nn.ReLU)
        self.cv4 = _ConvBNAct(hidden, hidden, 1, act=nn.ReLU)
        self.pool = nn.MaxPool2d(5, 1, 2)
        self.cv5 = _ConvBNAct(4 * hidden, hidden, 1, act=nn.ReLU)
        self.cv6 = _ConvBNAct(hidden, hidden, 3, act=nn.ReLU)
        self.cv7 = _ConvBNAct(2 * hidden, c_out, 1, act=nn.ReLU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.cv4(self.cv3(self.cv1(x)))
        y1 = self.pool(x1)
        y2 = self.pool(y1)
        y3 = self.cv6(self.cv5(torch.cat([x1, y1, y2, self.pool(y2)], 1)))
        return self.cv7(torch.cat([self.cv2(x), y3], 1))


class _BiFusion(nn.Module):
    """Fuses the coarser level (upsampled by a transposed conv), this level and the finer one
    (downsampled by a stride-2 conv)."""

    def __init__(self, c_this: int, c_finer: int, c_out: int):
        super().__init__()
        self.cv1 = _ConvBNAct(c_this, c_out, 1, act=nn.ReLU)
        self.cv2 = _ConvBNAct(c_finer, c_out, 1, act=nn.ReLU)
        self.cv3 = _ConvBNAct(3 * c_out, c_out, 1, act=nn.ReLU)
        self.upsample = nn.ConvTranspose2d(c_out, c_out, 2, 2, bias=True)
        self.downsample = _ConvBNAct(c_out, c_out, 3, 2, nn.ReLU)

    def forward(self, coarser: torch.Tensor, this: torch.Tensor, finer: torch.Tensor) -> torch.Tensor:
        return self.cv3(torch.cat([self.upsample(coarser), self.cv1(this),
                                   self.downsample(self.cv2(finer))], 1))


class YOLOv6n(nn.Module):
    """EfficientRep + RepBiFPAN + efficient decoupled head, with the zoo's 9 outputs."""

    # make_divisible(c * 0.25, 8) of backbone [64..1024] and neck [256, 128, 128, 256, 256, 512]
    BACKBONE = (16, 32, 64, 128, 256)
    NECK = (64, 32, 32, 64, 64, 128)
    # max(round(n * 0.33), 1) of backbone [1, 6, 12, 18, 6] and neck [12] * 4
    REPEATS = (1, 2, 4, 6, 2)
    NECK_REPEATS = 4

    def __init__(self, num_classes: int = 80):
        super().__init__()
        c0, c1, c2, c3, c4 = self.BACKBONE
        n5, n6, n7, n8, n9, n10 = self.NECK
        r = self.REPEATS
        self.stem = _rep(3, c0, 2)
        self.er2 = nn.Sequential(_rep(c0, c1, 2), _rep_block(c1, c1, r[1]))  # P2, fused into the neck
        self.er3 = nn.Sequential(_rep(c1, c2, 2), _rep_block(c2, c2, r[2]))
        self.er4 = nn.Sequential(_rep(c2, c3, 2), _rep_block(c3, c3, r[3]))
        self.er5 = nn.Sequential(_rep(c3, c4, 2), _rep_block(c4, c4, r[4]), _SimCSPSPPF(c4, c4))
        n = self.NECK_REPEATS
        self.reduce_layer0 = _ConvBNAct(c4, n5, 1, act=nn.ReLU)
        self.bifusion0 = _BiFusion(c3, c2, n5)
        self.rep_p4 = _rep_block(n5, n5, n)
        self.reduce_layer1 = _ConvBNAct(n5, n6, 1, act=nn.ReLU)
        self.bifusion1 = _BiFusion(c2, c1, n6)
        self.rep_p3 = _rep_block(n6, n6, n)
        self.downsample2 = _ConvBNAct(n6, n7, 3, 2, nn.ReLU)
        self.rep_n3 = _rep_block(n6 + n7, n8, n)
        self.downsample1 = _ConvBNAct(n8, n9, 3, 2, nn.ReLU)
        self.rep_n4 = _rep_block(n5 + n9, n10, n)
        head = (n6, n8, n10)  # channels_list[6, 8, 10]
        self.stems = nn.ModuleList(_ConvBNAct(c, c, 1) for c in head)
        self.cls_convs = nn.ModuleList(_ConvBNAct(c, c, 3) for c in head)
        self.reg_convs = nn.ModuleList(_ConvBNAct(c, c, 3) for c in head)
        self.cls_preds = nn.ModuleList(nn.Conv2d(c, num_classes, 1) for c in head)
        self.reg_preds = nn.ModuleList(nn.Conv2d(c, 4, 1) for c in head)  # 4 * (reg_max 0 + 1)

    def forward(self, x: torch.Tensor):
        p2 = self.er2(self.stem(x))
        p3 = self.er3(p2)
        p4 = self.er4(p3)
        p5 = self.er5(p4)
        fpn_out0 = self.reduce_layer0(p5)
        f_out0 = self.rep_p4(self.bifusion0(fpn_out0, p4, p3))
        fpn_out1 = self.reduce_layer1(f_out0)
        pan_out2 = self.rep_p3(self.bifusion1(fpn_out1, p3, p2))
        pan_out1 = self.rep_n3(torch.cat([self.downsample2(pan_out2), fpn_out1], 1))
        pan_out0 = self.rep_n4(torch.cat([self.downsample1(pan_out1), fpn_out0], 1))
        outputs = []
        for i, feat in enumerate((pan_out2, pan_out1, pan_out0)):
            feat = self.stems[i](feat)
            cls = torch.sigmoid(self.cls_preds[i](self.cls_convs[i](feat)))
            box = self.reg_preds[i](self.reg_convs[i](feat))
            outputs += [box, cls, _score_sum(cls)]
        return tuple(outputs)


# -- YOLOv8n (Ultralytics yolov8.yaml, scale n) ------------------------------------------

class _Bottleneck(nn.Module):
    def __init__(self, c: int, shortcut: bool):
        super().__init__()
        self.cv1 = _ConvBNAct(c, c, 3)
        self.cv2 = _ConvBNAct(c, c, 3)
        self.add = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class _C2f(nn.Module):
    def __init__(self, c_in: int, c_out: int, n: int, shortcut: bool):
        super().__init__()
        self.hidden = c_out // 2
        self.cv1 = _ConvBNAct(c_in, 2 * self.hidden, 1)
        self.cv2 = _ConvBNAct((2 + n) * self.hidden, c_out, 1)
        self.m = nn.ModuleList(_Bottleneck(self.hidden, shortcut) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = list(self.cv1(x).split((self.hidden, self.hidden), 1))
        for block in self.m:
            y.append(block(y[-1]))
        return self.cv2(torch.cat(y, 1))


class YOLOv8n(nn.Module):
    """Backbone + PAN neck + decoupled head, with the zoo's 9 outputs (no DFL in the graph)."""

    def __init__(self, num_classes: int = 80, reg_max: int = 16):
        super().__init__()
        # yolov8.yaml channels x 0.25 (64..1024 -> 16..256); C2f repeats 3, 6 -> 1, 2
        self.b0 = _ConvBNAct(3, 16, 3, 2)
        self.b1 = _ConvBNAct(16, 32, 3, 2)
        self.b2 = _C2f(32, 32, 1, True)
        self.b3 = _ConvBNAct(32, 64, 3, 2)
        self.b4 = _C2f(64, 64, 2, True)
        self.b5 = _ConvBNAct(64, 128, 3, 2)
        self.b6 = _C2f(128, 128, 2, True)
        self.b7 = _ConvBNAct(128, 256, 3, 2)
        self.b8 = _C2f(256, 256, 1, True)
        self.b9 = _SPPF(256, 256, nn.SiLU)
        self.h12 = _C2f(256 + 128, 128, 1, False)
        self.h15 = _C2f(128 + 64, 64, 1, False)
        self.h16 = _ConvBNAct(64, 64, 3, 2)
        self.h18 = _C2f(64 + 128, 128, 1, False)
        self.h19 = _ConvBNAct(128, 128, 3, 2)
        self.h21 = _C2f(128 + 256, 256, 1, False)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        levels = (64, 128, 256)
        c_box = max(16, levels[0] // 4, 4 * reg_max)
        c_cls = max(levels[0], min(num_classes, 100))
        self.box = nn.ModuleList(nn.Sequential(_ConvBNAct(c, c_box, 3), _ConvBNAct(c_box, c_box, 3),
                                               nn.Conv2d(c_box, 4 * reg_max, 1)) for c in levels)
        self.cls = nn.ModuleList(nn.Sequential(_ConvBNAct(c, c_cls, 3), _ConvBNAct(c_cls, c_cls, 3),
                                               nn.Conv2d(c_cls, num_classes, 1)) for c in levels)

    def forward(self, x: torch.Tensor):
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h12 = self.h12(torch.cat([self.up(p5), p4], 1))
        out3 = self.h15(torch.cat([self.up(h12), p3], 1))
        out4 = self.h18(torch.cat([self.h16(out3), h12], 1))
        out5 = self.h21(torch.cat([self.h19(out4), p5], 1))
        outputs = []
        for i, feat in enumerate((out3, out4, out5)):
            cls = torch.sigmoid(self.cls[i](feat))
            outputs += [self.box[i](feat), cls, _score_sum(cls)]
        return tuple(outputs)


# -- YOLOX-S (Megvii YOLOX: CSPDarknet, YOLOPAFPN, YOLOXHead; depth 0.33, width 0.50) ------

def _xconv(c_in: int, c_out: int, kernel: int = 1, stride: int = 1) -> nn.Module:
    return _ConvBNAct(c_in, c_out, kernel, stride, nn.SiLU, eps=1e-3)  # YOLOX's BaseConv


class _XBottleneck(nn.Module):
    def __init__(self, c: int, shortcut: bool):
        super().__init__()
        self.conv1 = _xconv(c, c, 1)
        self.conv2 = _xconv(c, c, 3)
        self.add = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(self.conv1(x))
        return x + y if self.add else y


class _CSPLayer(nn.Module):
    def __init__(self, c_in: int, c_out: int, n: int, shortcut: bool = True):
        super().__init__()
        hidden = c_out // 2
        self.conv1 = _xconv(c_in, hidden)
        self.conv2 = _xconv(c_in, hidden)
        self.conv3 = _xconv(2 * hidden, c_out)
        self.m = nn.Sequential(*(_XBottleneck(hidden, shortcut) for _ in range(n)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv3(torch.cat([self.m(self.conv1(x)), self.conv2(x)], 1))


class _SPPBottleneck(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        hidden = c_in // 2
        self.conv1 = _xconv(c_in, hidden)
        self.pools = nn.ModuleList(nn.MaxPool2d(k, 1, k // 2) for k in (5, 9, 13))
        self.conv2 = _xconv(4 * hidden, c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        return self.conv2(torch.cat([x] + [pool(x) for pool in self.pools], 1))


class _Focus(nn.Module):
    """Space-to-depth (four strided slices) then a 3x3 conv."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = _xconv(4 * c_in, c_out, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top_left, top_right = x[..., ::2, ::2], x[..., ::2, 1::2]
        bottom_left, bottom_right = x[..., 1::2, ::2], x[..., 1::2, 1::2]
        return self.conv(torch.cat([top_left, bottom_left, top_right, bottom_right], 1))


class YOLOXs(nn.Module):
    """CSPDarknet + PAFPN + decoupled head; outputs the three head Concats (1x85xHxW)."""

    def __init__(self, num_classes: int = 80):
        super().__init__()
        # base channels int(64 * 0.5) = 32; CSP depth round(3 * 0.33) = 1, dark3/dark4 use 3x that
        self.stem = _Focus(3, 32)
        self.dark2 = nn.Sequential(_xconv(32, 64, 3, 2), _CSPLayer(64, 64, 1))
        self.dark3 = nn.Sequential(_xconv(64, 128, 3, 2), _CSPLayer(128, 128, 3))
        self.dark4 = nn.Sequential(_xconv(128, 256, 3, 2), _CSPLayer(256, 256, 3))
        self.dark5 = nn.Sequential(_xconv(256, 512, 3, 2), _SPPBottleneck(512, 512),
                                   _CSPLayer(512, 512, 1, shortcut=False))
        self.lateral_conv0 = _xconv(512, 256)
        self.c3_p4 = _CSPLayer(512, 256, 1, False)
        self.reduce_conv1 = _xconv(256, 128)
        self.c3_p3 = _CSPLayer(256, 128, 1, False)
        self.bu_conv2 = _xconv(128, 128, 3, 2)
        self.c3_n3 = _CSPLayer(256, 256, 1, False)
        self.bu_conv1 = _xconv(256, 256, 3, 2)
        self.c3_n4 = _CSPLayer(512, 512, 1, False)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        levels, hidden = (128, 256, 512), 128  # int(256 * 0.5)
        self.stems = nn.ModuleList(_xconv(c, hidden) for c in levels)
        self.cls_convs = nn.ModuleList(nn.Sequential(_xconv(hidden, hidden, 3), _xconv(hidden, hidden, 3))
                                       for _ in levels)
        self.reg_convs = nn.ModuleList(nn.Sequential(_xconv(hidden, hidden, 3), _xconv(hidden, hidden, 3))
                                       for _ in levels)
        self.cls_preds = nn.ModuleList(nn.Conv2d(hidden, num_classes, 1) for _ in levels)
        self.reg_preds = nn.ModuleList(nn.Conv2d(hidden, 4, 1) for _ in levels)
        self.obj_preds = nn.ModuleList(nn.Conv2d(hidden, 1, 1) for _ in levels)

    def forward(self, x: torch.Tensor):
        x = self.dark2(self.stem(x))
        x2 = self.dark3(x)
        x1 = self.dark4(x2)
        x0 = self.dark5(x1)
        fpn_out0 = self.lateral_conv0(x0)
        f_out0 = self.c3_p4(torch.cat([self.up(fpn_out0), x1], 1))
        fpn_out1 = self.reduce_conv1(f_out0)
        pan_out2 = self.c3_p3(torch.cat([self.up(fpn_out1), x2], 1))
        pan_out1 = self.c3_n3(torch.cat([self.bu_conv2(pan_out2), fpn_out1], 1))
        pan_out0 = self.c3_n4(torch.cat([self.bu_conv1(pan_out1), fpn_out0], 1))
        outputs = []
        for i, feat in enumerate((pan_out2, pan_out1, pan_out0)):
            feat = self.stems[i](feat)
            cls = self.cls_preds[i](self.cls_convs[i](feat))
            reg_feat = self.reg_convs[i](feat)
            outputs.append(torch.cat([self.reg_preds[i](reg_feat), torch.sigmoid(self.obj_preds[i](reg_feat)),
                                      torch.sigmoid(cls)], 1))
        return tuple(outputs)


# -- self-check ---------------------------------------------------------------------------

MODELS = {"YOLOv6n": YOLOv6n, "YOLOv8n": YOLOv8n, "YOLOXs": YOLOXs}
# (parameters, GFLOPs at 640x640) as each project publishes them
PUBLISHED = {"YOLOv6n": (4.7e6, 11.4), "YOLOv8n": (3.2e6, 8.7), "YOLOXs": (9.0e6, 26.8)}


def conv_counts(model: nn.Module, size: int = 640) -> tuple[int, int, int]:
    """(parameters as built, parameters once each BatchNorm is folded into its conv,
    conv multiply-adds for one 1x3xsizexsize image)."""
    macs = 0

    def count(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        nonlocal macs
        kernel = module.weight[0].numel()  # in/groups x kh x kw for a conv, out x kh x kw transposed
        macs += (output if isinstance(module, nn.Conv2d) else inputs[0]).numel() * kernel

    hooks = [m.register_forward_hook(count) for m in model.modules()
             if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))]
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    for hook in hooks:
        hook.remove()
    built = sum(p.numel() for p in model.parameters())
    folded = built - sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.BatchNorm2d))
    return built, folded, macs


def _main(outdir: str) -> None:
    import pathlib

    import onnx

    out = pathlib.Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for name, cls in MODELS.items():
        model = cls().eval()
        built, folded, macs = conv_counts(model)
        params, gflops = PUBLISHED[name]
        print(f"{name}: {built / 1e6:.3f}M parameters as built, {folded / 1e6:.3f}M with BatchNorm folded "
              f"(published {params / 1e6:.1f}M, {100 * (folded / params - 1):+.1f}%); "
              f"{2 * macs / 1e9:.2f} GFLOPs of conv (published {gflops}, {100 * (2 * macs / 1e9 / gflops - 1):+.1f}%)")
        path = out / f"{name}.onnx"
        torch.onnx.export(model, torch.zeros(1, 3, 640, 640), str(path), opset_version=12,
                          input_names=[INPUT_NAMES[name]], output_names=OUTPUT_NAMES[name],
                          dynamo=False, do_constant_folding=True)
        graph = onnx.load(str(path)).graph
        ops: dict[str, int] = {}
        for node in graph.node:
            ops[node.op_type] = ops.get(node.op_type, 0) + 1
        print(f"  {path}: ops {dict(sorted(ops.items()))}")
        for value in graph.output:
            dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
            print(f"  output {value.name!r}: {dims}")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/archs_zoo_det")
