"""Built-in networks, with layer shapes as the NVDLA performance estimator lists them."""
from __future__ import annotations

from typing import Callable

from .network import Network, Shape


def lenet5() -> Network:
    n = Network("lenet5", "data", Shape(1, 28, 28))
    x = n.conv("conv1", "data", 20, 5)
    x = n.pool("pool1", x, "max", 2, 2)
    x = n.conv("conv2", x, 50, 5)
    x = n.pool("pool2", x, "max", 2, 2)
    x = n.fc("ip1", x, 500, relu=True)
    n.fc("ip2", x, 10)
    return n


def alexnet() -> Network:
    """AlexNet (Caffe, two groups in conv2/4/5 as the estimator's split rows).

    The estimator lists conv1 as 224x224 in, 55x55 out with an 11x11 stride-4 kernel; Caffe gets 55
    from a 227x227 input.  We keep the estimator's 224x224 input and pad by 2 (which the estimator's
    'Zero Padding' column omits) so that every later shape and MAC count matches its rows."""
    n = Network("alexnet", "data", Shape(3, 224, 224))
    x = n.conv("conv1", "data", 96, 11, stride=4, pad=2, relu=True)
    x = n.add("lrn", "norm1", x, size=5, alpha=1e-4, beta=0.75, k=1.0)
    x = n.pool("pool1", x, "max", 3, 2)
    x = n.conv("conv2", x, 256, 5, pad=2, groups=2, relu=True)
    x = n.add("lrn", "norm2", x, size=5, alpha=1e-4, beta=0.75, k=1.0)
    x = n.pool("pool2", x, "max", 3, 2)
    x = n.conv("conv3", x, 384, 3, pad=1, relu=True)
    x = n.conv("conv4", x, 384, 3, pad=1, groups=2, relu=True)
    x = n.conv("conv5", x, 256, 3, pad=1, groups=2, relu=True)
    x = n.pool("pool5", x, "max", 3, 2)
    x = n.fc("fc6", x, 4096, relu=True)
    x = n.fc("fc7", x, 4096, relu=True)
    n.fc("fc8", x, 1000)
    return n


def resnet50() -> Network:
    n = Network("resnet50", "data", Shape(3, 224, 224))
    x = n.conv("conv1", "data", 64, 7, stride=2, pad=3, relu=True, batchnorm=True)
    x = n.pool("pool1", x, "max", 3, 2, pad=(0, 0, 1, 1))
    stages = [("2", 64, 3, 1), ("3", 128, 4, 2), ("4", 256, 6, 2), ("5", 512, 3, 2)]
    for stage, width, blocks, stride in stages:
        for b in range(blocks):
            tag = f"res{stage}{chr(ord('a') + b)}"
            s = stride if b == 0 else 1
            if b == 0:
                shortcut = n.conv(f"{tag}_branch1", x, width * 4, 1, stride=s, batchnorm=True)
            else:
                shortcut = x
            y = n.conv(f"{tag}_branch2a", x, width, 1, stride=s, relu=True, batchnorm=True)
            y = n.conv(f"{tag}_branch2b", y, width, 3, pad=1, relu=True, batchnorm=True)
            y = n.conv(f"{tag}_branch2c", y, width * 4, 1, batchnorm=True)
            x = n.add("add", tag, [y, shortcut], relu=True)
    x = n.global_avg_pool("pool5", x)
    n.fc("fc1000", x, 1000)
    return n


def resnet50_softmax() -> Network:
    """ResNet-50 with its classifier's softmax ("prob"), as a Jetson deployment has it."""
    n = resnet50()
    n.name = "resnet50_softmax"
    n.add("softmax", "prob", "fc1000", axis="c")
    return n


def googlenet() -> Network:
    n = Network("googlenet", "data", Shape(3, 224, 224))
    x = n.conv("conv1", "data", 64, 7, stride=2, pad=3, relu=True)
    x = n.pool("pool1", x, "max", 3, 2, ceil_mode=True)
    x = n.add("lrn", "norm1", x, size=5, alpha=1e-4, beta=0.75, k=1.0)
    x = n.conv("conv2_reduce", x, 64, 1, relu=True)
    x = n.conv("conv2", x, 192, 3, pad=1, relu=True)
    x = n.add("lrn", "norm2", x, size=5, alpha=1e-4, beta=0.75, k=1.0)
    x = n.pool("pool2", x, "max", 3, 2, ceil_mode=True)
    inception = {
        "3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
        "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64),
        "4c": (128, 128, 256, 24, 64, 64), "4d": (112, 144, 288, 32, 64, 64),
        "4e": (256, 160, 320, 32, 128, 128), "5a": (256, 160, 320, 32, 128, 128),
        "5b": (384, 192, 384, 48, 128, 128),
    }
    for tag, (c1, c3r, c3, c5r, c5, pp) in inception.items():
        p = f"inception_{tag}"
        b1 = n.conv(f"{p}_1x1", x, c1, 1, relu=True)
        b2 = n.conv(f"{p}_3x3_reduce", x, c3r, 1, relu=True)
        b2 = n.conv(f"{p}_3x3", b2, c3, 3, pad=1, relu=True)
        b3 = n.conv(f"{p}_5x5_reduce", x, c5r, 1, relu=True)
        b3 = n.conv(f"{p}_5x5", b3, c5, 5, pad=2, relu=True)
        b4 = n.pool(f"{p}_pool", x, "max", 3, 1, pad=1)
        b4 = n.conv(f"{p}_pool_proj", b4, pp, 1, relu=True)
        x = n.add("concat", f"{p}_output", [b1, b2, b3, b4])
        if tag in ("3b", "4e"):
            x = n.pool(f"pool_{tag}", x, "max", 3, 2, ceil_mode=True)
    x = n.global_avg_pool("pool5", x)
    n.fc("loss3_classifier", x, 1000)
    return n


BUILTIN: dict[str, Callable[[], Network]] = {
    "lenet5": lenet5, "alexnet": alexnet, "resnet50": resnet50, "googlenet": googlenet,
    "resnet50_softmax": resnet50_softmax,
}
