"""The course models' architectures, written out in plain PyTorch.

torchvision is not used: its PyPI wheels do not import beside the CPU torch
build this pipeline pins, and the architectures are short.  Each follows its
published definition (layer for layer, channel for channel); weights are
seeded-random except for the digits CNN, which build.py trains.
"""
from __future__ import annotations

import math

import torch
from torch import nn


# -- MobileNetV2 (Sandler et al. 2018; the torchvision layout) -------------------------

def _make_divisible(value: float, divisor: int = 8) -> int:
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:  # never round down by more than 10%
        rounded += divisor
    return rounded


class _ConvBNReLU6(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, kernel: int = 3, stride: int = 1, groups: int = 1):
        super().__init__(
            nn.Conv2d(c_in, c_out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU6(inplace=True),
        )


class _InvertedResidual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, expand: int):
        super().__init__()
        hidden = c_in * expand
        self.use_residual = stride == 1 and c_in == c_out
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_ConvBNReLU6(c_in, hidden, kernel=1))
        layers += [
            _ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),
            nn.Conv2d(hidden, c_out, 1, bias=False),
            nn.BatchNorm2d(c_out),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, first stride s) from the paper's Table 2
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        c_in = 32
        layers: list[nn.Module] = [_ConvBNReLU6(3, c_in, stride=2)]
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(_InvertedResidual(c_in, c, s if i == 0 else 1, t))
                c_in = c
        layers.append(_ConvBNReLU6(c_in, 1280, kernel=1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


# -- ResNet-50 (He et al. 2016, v1.5: stride on the 3x3) -------------------------------

class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        c_out = width * self.expansion
        self.body = nn.Sequential(
            nn.Conv2d(c_in, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, c_out, 1, bias=False), nn.BatchNorm2d(c_out),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks: list[nn.Module] = []
        c_in = 64
        for width, repeats, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for i in range(repeats):
                blocks.append(_Bottleneck(c_in, width, stride if i == 0 else 1))
                c_in = width * _Bottleneck.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


# -- YOLOv5 v6/v7 (Ultralytics yolov5{n,s,m}.yaml; RKNN model zoo export) ---------------

class _YConv(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, kernel: int = 1, stride: int = 1, act: type = nn.SiLU,
                 padding: int | None = None):
        super().__init__(
            nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2 if padding is None else padding, bias=False),
            nn.BatchNorm2d(c_out),
            act(),
        )


class _YBottleneck(nn.Module):
    def __init__(self, c: int, shortcut: bool, act: type):
        super().__init__()
        self.cv1 = _YConv(c, c, 1, act=act)
        self.cv2 = _YConv(c, c, 3, act=act)
        self.add = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class _C3(nn.Module):
    def __init__(self, c_in: int, c_out: int, n: int, shortcut: bool, act: type):
        super().__init__()
        hidden = c_out // 2
        self.cv1 = _YConv(c_in, hidden, act=act)
        self.cv2 = _YConv(c_in, hidden, act=act)
        self.cv3 = _YConv(2 * hidden, c_out, act=act)
        self.m = nn.Sequential(*(_YBottleneck(hidden, shortcut, act) for _ in range(n)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class _SPPF(nn.Module):
    def __init__(self, c_in: int, c_out: int, act: type):
        super().__init__()
        hidden = c_in // 2
        self.cv1 = _YConv(c_in, hidden, act=act)
        self.cv2 = _YConv(hidden * 4, c_out, act=act)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))


class YOLOv5(nn.Module):
    """Backbone + PANet neck + the three 1x1 detection convs, with no decoding:
    the RKNN model zoo exports exactly these raw head outputs (1x255xHxW)."""

    SCALES = {"n": (0.33, 0.25), "s": (0.33, 0.50), "m": (0.67, 0.75)}

    def __init__(self, scale: str = "s", act: type = nn.SiLU, num_classes: int = 80, anchors: int = 3):
        super().__init__()
        depth, width = self.SCALES[scale]

        def ch(c: int) -> int:
            return int(math.ceil(c * width / 8) * 8)

        def rep(n: int) -> int:
            return max(round(n * depth), 1)

        self.b0 = _YConv(3, ch(64), 6, 2, act, padding=2)  # the v6.0 stem that replaced Focus
        self.b1 = _YConv(ch(64), ch(128), 3, 2, act)
        self.b2 = _C3(ch(128), ch(128), rep(3), True, act)
        self.b3 = _YConv(ch(128), ch(256), 3, 2, act)
        self.b4 = _C3(ch(256), ch(256), rep(6), True, act)
        self.b5 = _YConv(ch(256), ch(512), 3, 2, act)
        self.b6 = _C3(ch(512), ch(512), rep(9), True, act)
        self.b7 = _YConv(ch(512), ch(1024), 3, 2, act)
        self.b8 = _C3(ch(1024), ch(1024), rep(3), True, act)
        self.b9 = _SPPF(ch(1024), ch(1024), act)
        self.h10 = _YConv(ch(1024), ch(512), 1, 1, act)
        self.h13 = _C3(ch(1024), ch(512), rep(3), False, act)
        self.h14 = _YConv(ch(512), ch(256), 1, 1, act)
        self.h17 = _C3(ch(512), ch(256), rep(3), False, act)
        self.h18 = _YConv(ch(256), ch(256), 3, 2, act)
        self.h20 = _C3(ch(512), ch(512), rep(3), False, act)
        self.h21 = _YConv(ch(512), ch(512), 3, 2, act)
        self.h23 = _C3(ch(1024), ch(1024), rep(3), False, act)
        outputs = anchors * (num_classes + 5)
        self.detect = nn.ModuleList(nn.Conv2d(c, outputs, 1) for c in (ch(256), ch(512), ch(1024)))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x: torch.Tensor):
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        x = self.b9(self.b8(self.b7(p4)))
        h10 = self.h10(x)
        x = self.h13(torch.cat([self.up(h10), p4], 1))
        h14 = self.h14(x)
        out3 = self.h17(torch.cat([self.up(h14), p3], 1))
        out4 = self.h20(torch.cat([self.h18(out3), h14], 1))
        out5 = self.h23(torch.cat([self.h21(out4), h10], 1))
        return tuple(conv(t) for conv, t in zip(self.detect, (out3, out4, out5)))


# -- A small CNN for scikit-learn's 8x8 digits ----------------------------------------

class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        )
        self.classifier = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))
