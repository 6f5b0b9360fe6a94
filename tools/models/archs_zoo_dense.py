"""Two RKNN model zoo networks with dense heads, written out in plain PyTorch.

Both are rebuilt from their published definitions (no torchvision, as in
archs.py) so that the course pipeline can compile them with seeded-random
weights: the compiler's per-layer cycles and DDR bytes depend on the graph's
shapes and operators, not on weight values.

RetinaFaceMobile
    biubug6/Pytorch_Retinaface, the source the RKNN model zoo names for
    RetinaFace_mobile320.onnx: models/net.py (conv_bn, conv_dw, MobileNetV1,
    FPN, SSH), models/retinaface.py (ClassHead, BboxHead, LandmarkHead,
    RetinaFace), data/config.py cfg_mnet (in_channel 32, out_channel 64,
    2 anchors per cell), exported as convert_to_onnx.py does it: phase 'test',
    so the class scores leave the graph through a softmax.  The zoo's Python and
    C post-processing read three outputs in this order: loc (1x4200x4),
    conf (1x4200x2, probabilities: they threshold conf[:, 1] directly) and
    landmarks (1x4200x10), 4200 = 2 anchors x (40² + 20² + 10²) at 320x320.
    biubug6 names only the first output ("output0"); the other two names are
    ours.  The zoo's convert.py compiles it with mean 104,117,123, std 1.

DeepLabV3PlusMobileNetV2
    The zoo's deeplab-v3-plus-mobilenet-v2.pb is TensorFlow DeepLab's
    mobilenetv2_coco_voc_trainaug frozen graph (tensorflow/models,
    research/deeplab, model_variant=mobilenet_v2), which the zoo's convert.py
    crops to input 'sub_7' (1x513x513x3, already scaled to [-1, 1]) and output
    'logits/semantic/BiasAdd'.  Its C demo reads a 65x65 output: output
    stride 8.  Definition followed: MobileNetV2 depth 1.0 (TF slim mobilenet_v2
    V2_DEF) up to layer_18 (320 channels; no 1280 conv, no classifier), with
    atrous convolution once the output stride is reached (TF mobilenet's rule:
    the unit that would exceed it gets stride 1 and the current rate, later
    units the rate times that stride, so rates 2 then 4 at stride 8); the
    mobilenet_v2 checkpoints use no atrous ASPP rates and no decoder (DeepLab
    model zoo: ASPP "N/A", decoder "N/A"), so the ASPP is image pooling
    (global mean, 1x1 conv 256 + BN + ReLU, bilinear resize back with
    align_corners=True) and a 1x1 conv 256 + BN + ReLU, concatenated, projected
    by a 1x1 conv 256 + BN + ReLU, then the logits 1x1 conv with bias to 21
    classes.  The TF graph is NHWC (output 1x65x65x21); this export is NCHW
    (input 1x3x513x513, output 1x21x65x65).  TF 'SAME' padding on the odd
    513 side pads 1 on each side for every 3x3 stride-2 conv, as padding=1 does
    here, so every feature size matches (257, 129, 65).  The zoo's convert.py
    compiles it with mean 127.5, std 127.5 (the [-1, 1] scaling that 'sub_7'
    ends).

Run this file to check both: parameters, multiply-adds, published figures,
ONNX export and output shapes.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


# -- RetinaFace, MobileNet-0.25 (biubug6/Pytorch_Retinaface) ---------------------------

def _conv_bn(c_in: int, c_out: int, stride: int = 1, leaky: float = 0.0) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out),
                         nn.LeakyReLU(leaky, inplace=True))


def _conv_bn_no_relu(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out))


def _conv_bn1x1(c_in: int, c_out: int, leaky: float) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 1, 1, 0, bias=False), nn.BatchNorm2d(c_out),
                         nn.LeakyReLU(leaky, inplace=True))


def _conv_dw(c_in: int, c_out: int, stride: int, leaky: float = 0.1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False), nn.BatchNorm2d(c_in),
        nn.LeakyReLU(leaky, inplace=True),
        nn.Conv2d(c_in, c_out, 1, 1, 0, bias=False), nn.BatchNorm2d(c_out),
        nn.LeakyReLU(leaky, inplace=True),
    )


class _MobileNetV1x025(nn.Module):
    """The three stages RetinaFace taps (strides 8, 16, 32); biubug6's avg/fc are unused."""

    def __init__(self):
        super().__init__()
        self.stage1 = nn.Sequential(_conv_bn(3, 8, 2, leaky=0.1), _conv_dw(8, 16, 1), _conv_dw(16, 32, 2),
                                    _conv_dw(32, 32, 1), _conv_dw(32, 64, 2), _conv_dw(64, 64, 1))
        self.stage2 = nn.Sequential(_conv_dw(64, 128, 2), *[_conv_dw(128, 128, 1) for _ in range(5)])
        self.stage3 = nn.Sequential(_conv_dw(128, 256, 2), _conv_dw(256, 256, 1))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        c1 = self.stage1(x)
        c2 = self.stage2(c1)
        return [c1, c2, self.stage3(c2)]


class _FPN(nn.Module):
    def __init__(self, in_channels: list[int], out_channels: int):
        super().__init__()
        leaky = 0.1 if out_channels <= 64 else 0.0  # biubug6's rule
        self.output1 = _conv_bn1x1(in_channels[0], out_channels, leaky)
        self.output2 = _conv_bn1x1(in_channels[1], out_channels, leaky)
        self.output3 = _conv_bn1x1(in_channels[2], out_channels, leaky)
        self.merge1 = _conv_bn(out_channels, out_channels, leaky=leaky)
        self.merge2 = _conv_bn(out_channels, out_channels, leaky=leaky)

    def forward(self, features: list[torch.Tensor]) -> list[torch.Tensor]:
        out1 = self.output1(features[0])
        out2 = self.output2(features[1])
        out3 = self.output3(features[2])
        out2 = self.merge2(out2 + F.interpolate(out3, size=[out2.size(2), out2.size(3)], mode="nearest"))
        out1 = self.merge1(out1 + F.interpolate(out2, size=[out1.size(2), out1.size(3)], mode="nearest"))
        return [out1, out2, out3]


class _SSH(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        leaky = 0.1 if c_out <= 64 else 0.0  # biubug6's rule
        self.conv3x3 = _conv_bn_no_relu(c_in, c_out // 2)
        self.conv5x5_1 = _conv_bn(c_in, c_out // 4, leaky=leaky)
        self.conv5x5_2 = _conv_bn_no_relu(c_out // 4, c_out // 4)
        self.conv7x7_2 = _conv_bn(c_out // 4, c_out // 4, leaky=leaky)
        self.conv7x7_3 = _conv_bn_no_relu(c_out // 4, c_out // 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch5 = self.conv5x5_1(x)
        out = torch.cat([self.conv3x3(x), self.conv5x5_2(branch5),
                         self.conv7x7_3(self.conv7x7_2(branch5))], dim=1)
        return F.relu(out)


class _Head(nn.Module):
    """ClassHead / BboxHead / LandmarkHead: 1x1 conv, NHWC permute, (N, cells*anchors, values)."""

    def __init__(self, c_in: int, anchors: int, values: int):
        super().__init__()
        self.values = values
        self.conv1x1 = nn.Conv2d(c_in, anchors * values, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1x1(x).permute(0, 2, 3, 1).contiguous()
        return out.view(out.shape[0], -1, self.values)


class RetinaFaceMobile(nn.Module):
    """RetinaFace-MobileNet0.25 as biubug6 exports it (phase 'test'): (loc, conf, landmarks)."""

    ANCHORS = 2

    def __init__(self):
        super().__init__()
        self.body = _MobileNetV1x025()
        self.fpn = _FPN([64, 128, 256], 64)
        self.ssh1, self.ssh2, self.ssh3 = _SSH(64, 64), _SSH(64, 64), _SSH(64, 64)
        self.ClassHead = nn.ModuleList([_Head(64, self.ANCHORS, 2) for _ in range(3)])
        self.BboxHead = nn.ModuleList([_Head(64, self.ANCHORS, 4) for _ in range(3)])
        self.LandmarkHead = nn.ModuleList([_Head(64, self.ANCHORS, 10) for _ in range(3)])

    def forward(self, x: torch.Tensor):
        fpn = self.fpn(self.body(x))
        features = [self.ssh1(fpn[0]), self.ssh2(fpn[1]), self.ssh3(fpn[2])]
        loc = torch.cat([head(f) for head, f in zip(self.BboxHead, features)], dim=1)
        conf = torch.cat([head(f) for head, f in zip(self.ClassHead, features)], dim=1)
        landmarks = torch.cat([head(f) for head, f in zip(self.LandmarkHead, features)], dim=1)
        return loc, F.softmax(conf, dim=-1), landmarks


# -- DeepLab v3 (TF DeepLab, model_variant=mobilenet_v2) -------------------------------

class _ConvBNReLU6(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, kernel: int = 1, stride: int = 1, groups: int = 1,
                 dilation: int = 1):
        padding = dilation * (kernel - 1) // 2
        super().__init__(
            nn.Conv2d(c_in, c_out, kernel, stride, padding, dilation=dilation, groups=groups, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU6(inplace=True),
        )


class _ExpandedConv(nn.Module):
    """TF mobilenet's expanded_conv: no expansion conv when the factor is 1."""

    def __init__(self, c_in: int, c_out: int, stride: int, expand: int, dilation: int):
        super().__init__()
        hidden = c_in * expand
        self.use_residual = stride == 1 and c_in == c_out
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_ConvBNReLU6(c_in, hidden))
        layers += [_ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden, dilation=dilation),
                   nn.Conv2d(hidden, c_out, 1, bias=False), nn.BatchNorm2d(c_out)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


class _ConvBNReLU(nn.Sequential):
    def __init__(self, c_in: int, c_out: int):
        super().__init__(nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class DeepLabV3PlusMobileNetV2(nn.Module):
    """DeepLab mobilenetv2_coco_voc_trainaug from 'sub_7' to 'logits/semantic/BiasAdd', NCHW."""

    # (expansion t, channels c, repeats n, first stride s): TF mobilenet V2_DEF
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes: int = 21, output_stride: int = 8, input_side: int = 513):
        super().__init__()
        layers: list[nn.Module] = [_ConvBNReLU6(3, 32, 3, 2)]
        current_stride, rate, c_in = 2, 1, 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                stride = s if i == 0 else 1
                if current_stride == output_stride:  # TF mobilenet's atrous rule
                    layer_stride, layer_rate, rate = 1, rate, rate * stride
                else:
                    layer_stride, layer_rate = stride, 1
                    current_stride *= stride
                layers.append(_ExpandedConv(c_in, c, layer_stride, t, layer_rate))
                c_in = c
        self.features = nn.Sequential(*layers)
        side = input_side
        for _ in range(output_stride.bit_length() - 1):
            side = (side + 1) // 2  # TF 'SAME': ceil(side / 2)
        self.feature_side = side
        self.image_pooling = _ConvBNReLU(c_in, 256)
        self.aspp0 = _ConvBNReLU(c_in, 256)
        self.concat_projection = _ConvBNReLU(512, 256)
        self.logits = nn.Conv2d(256, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.features(x)
        pooled = self.image_pooling(features.mean(dim=(2, 3), keepdim=True))
        pooled = F.interpolate(pooled, size=(self.feature_side, self.feature_side), mode="bilinear",
                               align_corners=True)
        branches = torch.cat([pooled, self.aspp0(features)], dim=1)
        return self.logits(self.concat_projection(branches))


OUTPUT_NAMES = {
    "RetinaFaceMobile": ["loc", "conf", "landmarks"],
    "DeepLabV3PlusMobileNetV2": ["logits"],
}
INPUT = {
    "RetinaFaceMobile": (1, 3, 320, 320),
    "DeepLabV3PlusMobileNetV2": (1, 3, 513, 513),
}
# What each model's original publishes, to compare with what __main__ counts.
PUBLISHED = {
    "RetinaFaceMobile": "biubug6 README: 'Model size only 1.7M' (mobilenet0.25_Final.pth, float32 "
                        "state dict with BN buffers), i.e. about 0.43M numbers",
    "DeepLabV3PlusMobileNetV2": "DeepLab model_zoo.md, mobilenetv2_coco_voc_trainaug: 2.75B multiply-adds "
                                "at eval output stride 16, 513x513, one scale; 23MB archive "
                                "(checkpoint + frozen graph); no parameter count published",
}


def count_macs(model: nn.Module, shape: tuple[int, ...]) -> int:
    """Multiply-adds of every Conv2d and Linear for one input, counted from hooks."""
    total = 0

    def conv_hook(module: nn.Conv2d, _inputs, output: torch.Tensor) -> None:
        nonlocal total
        per_output = (module.in_channels // module.groups) * module.kernel_size[0] * module.kernel_size[1]
        total += output.numel() * per_output

    def linear_hook(module: nn.Linear, _inputs, output: torch.Tensor) -> None:
        nonlocal total
        total += output.numel() * module.in_features

    handles = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            handles.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.Linear):
            handles.append(module.register_forward_hook(linear_hook))
    with torch.no_grad():
        model(torch.zeros(shape))
    for handle in handles:
        handle.remove()
    return total


def _self_check(outdir: str) -> None:
    import os

    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    for name, cls in (("RetinaFaceMobile", RetinaFaceMobile), ("DeepLabV3PlusMobileNetV2", DeepLabV3PlusMobileNetV2)):
        model = cls().eval()
        params = sum(p.numel() for p in model.parameters())
        buffers = sum(b.numel() for n, b in model.named_buffers() if not n.endswith("num_batches_tracked"))
        macs = count_macs(model, INPUT[name])
        print(f"{name}: {params / 1e6:.3f}M parameters (+{buffers / 1e6:.3f}M BN buffers, "
              f"{(params + buffers) * 4 / 1e6:.2f} MB as float32), {macs / 1e9:.3f}G multiply-adds at {INPUT[name]}")
        if name == "DeepLabV3PlusMobileNetV2":
            os16 = count_macs(cls(output_stride=16).eval(), INPUT[name])
            print(f"  same network at output stride 16: {os16 / 1e9:.3f}G multiply-adds")
        print(f"  published: {PUBLISHED[name]}")
        path = os.path.join(outdir, f"{name}.onnx")
        torch.onnx.export(model, torch.zeros(INPUT[name]), path, opset_version=12, input_names=["input"],
                          output_names=OUTPUT_NAMES[name], dynamo=False, do_constant_folding=True)
        with torch.no_grad():
            outputs = model(torch.rand(INPUT[name]))
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        for out_name, out in zip(OUTPUT_NAMES[name], outputs):
            print(f"  output {out_name}: {list(out.shape)}")
        print(f"  ONNX: {path}")


if __name__ == "__main__":
    import sys

    _self_check(sys.argv[1] if len(sys.argv) > 1 else "/tmp/archs_zoo_dense")
