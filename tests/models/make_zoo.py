#!/usr/bin/python3
"""Exports the model zoo: torchvision networks as a user would bring them, NAME.onnx and NAME.input.npy.

    /usr/bin/python3 make_zoo.py OUT_DIR [--only NAME ...] [--list]

Runs under Debian's python3-torchvision (torch 1.13, /usr/bin/python3), which has no onnx or
onnxruntime; zoo_reference.py then writes NAME.expected.npy with ONNX Runtime from the other python.
Each model is built from torchvision's own classes with random weights (torch.manual_seed per
model, so the files are the same on every run), put in eval mode, and exported by
torch.onnx.export with a symbolic batch dimension ("batch", through dynamic_axes) — the form that
has to be bound with --input-shape. Batch norms get random running statistics and affine
parameters, so they are not the identity and folding them is tested; layers torchvision
initializes to zero (the vision transformer's head) get random weights. The CNNs are exported at
opset 13; convnext_tiny and the vision transformer at opset 17, where LayerNorm is one
LayerNormalization node, and again at opset 13 (NAME_opset13), where it is decomposed.
"""
import argparse
import os
import sys

import numpy as np

try:
    import torch
    import torchvision
    from torchvision.models import segmentation
    from torchvision.models.vision_transformer import VisionTransformer
except ImportError as e:
    sys.exit("make_zoo.py: %s: %s needs Debian's python3-torchvision (scripts/setup.sh installs it)"
             % (e, sys.executable))


def small_vit():
    # The small transformer: 224x224 images, patch 16, 6 layers, width 192, 3 heads.
    return VisionTransformer(image_size=224, patch_size=16, num_layers=6, num_heads=3,
                             hidden_dim=192, mlp_dim=768, num_classes=1000)


def lraspp():
    # Segmentation: its head upsamples with bilinear Resize (align_corners=False).
    return segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                  num_classes=21)


# name -> (constructor, opset); every model takes INPUT_SHAPE at batch 1
MODELS = {
    "densenet121": (lambda: torchvision.models.densenet121(weights=None), 13),
    "googlenet": (lambda: torchvision.models.googlenet(weights=None, aux_logits=False,
                                                       init_weights=True), 13),
    "regnet_y_400mf": (lambda: torchvision.models.regnet_y_400mf(weights=None), 13),
    "mnasnet1_0": (lambda: torchvision.models.mnasnet1_0(weights=None), 13),
    "resnext50_32x4d": (lambda: torchvision.models.resnext50_32x4d(weights=None), 13),
    "convnext_tiny": (lambda: torchvision.models.convnext_tiny(weights=None), 17),
    "vit_small": (small_vit, 17),
    "lraspp_mobilenet_v3_large": (lraspp, 13),
    # The same two transformers at opset 13, where the exporter writes LayerNorm decomposed
    # (ReduceMean, Sub, Pow, Sqrt, Div, with its shape arithmetic).
    "convnext_tiny_opset13": (lambda: torchvision.models.convnext_tiny(weights=None), 13),
    "vit_small_opset13": (small_vit, 13),
}
INPUT_SHAPE = (1, 3, 224, 224)


class OutTensor(torch.nn.Module):
    """Segmentation models return {"out": tensor}; the zoo's models have one tensor output."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def randomize_batch_norms(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)


def randomize_zero_weights(model, gen):
    # torchvision zero-initializes some layers (the vision transformer's classification head),
    # which would make the output identically 0 and the comparison empty.
    for m in model.modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) and not m.weight.detach().any():
            fan_in = m.weight[0].numel()
            m.weight.data.copy_(torch.randn(m.weight.shape, generator=gen) / fan_in ** 0.5)


def export(name, out_dir, opset_override=None):
    make, opset = MODELS[name]
    if opset_override:
        opset = opset_override
    torch.manual_seed(15)
    model = make()
    gen = torch.Generator().manual_seed(1515)
    with torch.no_grad():
        randomize_batch_norms(model, gen)
        randomize_zero_weights(model, gen)
    if name.startswith("lraspp"):
        model = OutTensor(model)
    model.eval()
    x = torch.randn(*INPUT_SHAPE, generator=gen)
    path = os.path.join(out_dir, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          do_constant_folding=True)
    np.save(os.path.join(out_dir, name + ".input.npy"), x.numpy().astype(np.float32))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", action="append", choices=sorted(MODELS))
    ap.add_argument("--opset", type=int, help="export every model at this opset instead")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    args = ap.parse_args()
    if args.list:
        print(" ".join(MODELS))
        return 0
    if not args.out_dir:
        ap.error("OUT_DIR is required")
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.only or list(MODELS):
        export(name, args.out_dir, args.opset)
        print("exported", name, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
