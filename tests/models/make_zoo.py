#!/usr/bin/python3
"""Exports a model zoo: networks as a user would bring them, NAME.onnx and one NAME.<input>.npy per
graph input.

    /usr/bin/python3 make_zoo.py OUT_DIR [--set zoo|wide] [--only NAME ...] [--list]

Two sets. `zoo` (the default) is the ten torchvision networks the zoo test and `scripts/bench.sh
zoo` measure: one input, "input", of 1x3x224x224 with a symbolic batch dimension ("batch", through
dynamic_axes), the form that has to be bound with --input-shape. `wide` is every torchvision
classification network that exports (LEFT_OUT says which do not), its segmentation and
video networks, detection backbones and RAFT, and the families torchvision lacks, written out in
wide_families.py (a BERT-like encoder, a GPT-2-like decoder, an encoder-decoder, speech front
ends, recurrent classifiers, a TCN, UNets, a GAN generator, a 3-D CNN), each with its own inputs
(token ids int64 [N, T], audio [N, C, T], video [N, 3, T, H, W]); most at batch 1 with static
shapes, a few at batch 8 (NAME_b8) and a few with symbolic dimensions (NAME_dyn*) whose .npy
files say the shapes to bind. The benches and tests bind every input to its .npy's shape.

Runs under Debian's python3-torchvision (torch 1.13, /usr/bin/python3), which has no onnx or
onnxruntime; zoo_reference.py then writes NAME.expected.npy (the first output) with ONNX Runtime
from the other python. Each model is built with random weights (torch.manual_seed per model, so
the files are the same on every run), put in eval mode, and exported by torch.onnx.export. Batch
norms get random running statistics and affine parameters, so they are not the identity and
folding them is tested; layers initialized to zero (the vision transformer's head) get random
weights. In the zoo the CNNs are exported at opset 13; convnext_tiny and the vision transformer
at opset 17, where LayerNorm is one LayerNormalization node, and again at opset 13
(NAME_opset13), where it is decomposed. The wide set exports CNNs at opset 13, networks with
LayerNorm at 17, and a few at 15 and 16 (RAFT's GridSample needs 16).
"""
import argparse
import os
import sys

import numpy as np

try:
    import torch
    import torchvision
    from torchvision.models import detection, optical_flow, segmentation, video
    from torchvision.models.vision_transformer import VisionTransformer
except ImportError as e:
    sys.exit("make_zoo.py: %s: %s needs Debian's python3-torchvision (scripts/setup.sh installs it)"
             % (e, sys.executable))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wide_families as wf  # noqa: E402  (beside this script)


def small_vit():
    # The small transformer: 224x224 images, patch 16, 6 layers, width 192, 3 heads.
    return VisionTransformer(image_size=224, patch_size=16, num_layers=6, num_heads=3,
                             hidden_dim=192, mlp_dim=768, num_classes=1000)


def lraspp():
    # Segmentation: its head upsamples with bilinear Resize (align_corners=False).
    return segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                  num_classes=21)


class Spec:
    """One model of a set: how to build it, the opset, its inputs and which dimensions stay
    symbolic.

    inputs: (name, kind, shape[, high]) per graph input, in forward's order; kind is "randn"
    (float32 normal), "ids" (int64 token ids in [0, high)) or "mask" (int64 ones, the last
    quarter of each row 0: padding). dynamic: {input name: {axis: symbol}}; the output's first
    axis follows the first input's axis 0 when that is symbolic.
    """

    def __init__(self, make, opset, inputs=None, dynamic=None, trace_with_grad=False):
        self.make = make
        self.opset = opset
        self.inputs = inputs or [("input", "randn", (1, 3, 224, 224))]
        self.dynamic = dynamic or {}
        # Traced with autograd on: under no_grad, nn.MultiheadAttention with an even head count
        # takes its fused inference path, aten::_native_multi_head_attention, which torch 1.13
        # cannot export.
        self.trace_with_grad = trace_with_grad


def image(n=1, size=224):
    return [("input", "randn", (n, 3, size, size))]


BATCH = {"input": {0: "batch"}}

# The zoo: every model takes 1x3x224x224 with a symbolic batch.
ZOO = {
    "densenet121": Spec(lambda: torchvision.models.densenet121(weights=None), 13, dynamic=BATCH),
    "googlenet": Spec(lambda: torchvision.models.googlenet(weights=None, aux_logits=False,
                                                           init_weights=True), 13, dynamic=BATCH),
    "regnet_y_400mf": Spec(lambda: torchvision.models.regnet_y_400mf(weights=None), 13,
                           dynamic=BATCH),
    "mnasnet1_0": Spec(lambda: torchvision.models.mnasnet1_0(weights=None), 13, dynamic=BATCH),
    "resnext50_32x4d": Spec(lambda: torchvision.models.resnext50_32x4d(weights=None), 13,
                            dynamic=BATCH),
    "convnext_tiny": Spec(lambda: torchvision.models.convnext_tiny(weights=None), 17,
                          dynamic=BATCH),
    "vit_small": Spec(small_vit, 17, dynamic=BATCH),
    "lraspp_mobilenet_v3_large": Spec(lraspp, 13, dynamic=BATCH),
    # The same two transformers at opset 13, where the exporter writes LayerNorm decomposed
    # (ReduceMean, Sub, Pow, Sqrt, Div, with its shape arithmetic).
    "convnext_tiny_opset13": Spec(lambda: torchvision.models.convnext_tiny(weights=None), 13,
                                  dynamic=BATCH),
    "vit_small_opset13": Spec(small_vit, 13, dynamic=BATCH),
}

# torchvision's classification networks left out of the wide set: two whose weights pass ONNX's
# 2 GiB protobuf limit, and the Swin V2 networks, which torch 1.13 cannot export ("Exporting the
# operator 'aten::zero' to ONNX opset version 17 is not supported").
LEFT_OUT = {"vit_h_14", "regnet_y_128gf", "swin_v2_t", "swin_v2_s", "swin_v2_b"}
# Networks with LayerNorm, exported at opset 17 (one LayerNormalization node).
LAYER_NORM_PREFIXES = ("convnext", "vit_", "swin", "maxvit")


def classification(name):
    def make():
        kwargs = {"weights": None}
        if name in ("googlenet", "inception_v3"):
            kwargs.update(aux_logits=False, init_weights=True)
        return getattr(torchvision.models, name)(**kwargs)

    opset = 17 if name.startswith(LAYER_NORM_PREFIXES) else 13
    if name.startswith("efficientnet_v2"):
        opset = 15  # a few at the opsets between
    return Spec(make, opset, image(1, 299 if name == "inception_v3" else 224),
                trace_with_grad=name.startswith("vit_"))


class FirstTensor(torch.nn.Module):
    """One tensor out of a model that returns a dict (segmentation: "out"), a list (RAFT: the
    flow of every update, the last kept) or an ordered dict of feature maps (a detection backbone:
    every level flattened and concatenated, so that none is dead)."""

    def __init__(self, model, how):
        super().__init__()
        self.model = model
        self.how = how

    def forward(self, *xs):
        y = self.model(*xs)
        if self.how == "out":
            return y["out"]
        if self.how == "last":
            return y[-1]
        return torch.cat([f.flatten(1) for f in y.values()], dim=1)


def seg(name, size=256):
    def make():
        return FirstTensor(getattr(segmentation, name)(weights=None, weights_backbone=None,
                                                       num_classes=21), "out")
    return Spec(make, 13, image(1, size))


def vid(name, frames=8, size=112):
    return Spec(lambda: getattr(video, name)(weights=None), 13,
                [("input", "randn", (1, 3, frames, size, size))])


def backbone(name, size):
    def make():
        kwargs = {"weights": None, "weights_backbone": None}
        return FirstTensor(getattr(detection, name)(**kwargs).backbone, "levels")
    return Spec(make, 13, image(1, size))


def raft_small():
    return FirstTensor(optical_flow.raft_small(weights=None), "last")


def ids(name, n, t, vocab):
    return (name, "ids", (n, t), vocab)


def wide_models():
    models = {}
    for name in torchvision.models.list_models(module=torchvision.models):
        if name not in LEFT_OUT:
            models[name] = classification(name)
    # Batch 8, and symbolic dimensions bound from the .npy shapes.
    models["resnet50_b8"] = Spec(lambda: torchvision.models.resnet50(weights=None), 13, image(8))
    models["mobilenet_v3_large_b8"] = Spec(
        lambda: torchvision.models.mobilenet_v3_large(weights=None), 13, image(8))
    models["resnet18_dynbatch"] = Spec(lambda: torchvision.models.resnet18(weights=None), 13,
                                       image(4), dynamic=BATCH)
    models["efficientnet_b0_dynbatch"] = Spec(
        lambda: torchvision.models.efficientnet_b0(weights=None), 16, image(2), dynamic=BATCH)
    # Segmentation (dilated convolutions, atrous pyramid pooling, bilinear upsampling) at 256x256.
    for name in ("fcn_resnet50", "fcn_resnet101", "deeplabv3_resnet50", "deeplabv3_resnet101",
                 "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"):
        models[name + "_256"] = seg(name)
    # Video: 3-D convolutions ((2+1)-D in r2plus1d), 8 frames of 112x112; S3D needs 16 frames of
    # 224x224. (MViT V2 is left out: torch 1.13's export of it was killed for memory after 25
    # minutes on a 23 GiB machine.)
    for name in ("r3d_18", "mc3_18", "r2plus1d_18"):
        models[name] = vid(name)
    models["s3d"] = vid("s3d", 16, 224)
    # Detection backbones with their feature pyramids, and optical flow.
    models["fasterrcnn_resnet50_fpn_backbone"] = backbone("fasterrcnn_resnet50_fpn", 320)
    models["fasterrcnn_mobilenet_v3_large_fpn_backbone"] = backbone(
        "fasterrcnn_mobilenet_v3_large_fpn", 320)
    models["ssdlite320_mobilenet_v3_large_backbone"] = backbone(
        "ssdlite320_mobilenet_v3_large", 320)
    models["raft_small"] = Spec(raft_small, 16, [("input0", "randn", (1, 3, 128, 128)),
                                                 ("input1", "randn", (1, 3, 128, 128))])
    # Text: encoders, a causal decoder, an encoder-decoder, recurrent classifiers.
    bert = [ids("input_ids", 1, 128, 30522), ("attention_mask", "mask", (1, 128))]
    models["bert_base"] = Spec(wf.BertEncoder, 17, bert)
    tiny = dict(dim=128, layers=2, heads=2, ffn=512)
    models["bert_tiny"] = Spec(lambda: wf.BertEncoder(**tiny), 17,
                               [ids("input_ids", 1, 32, 30522), ("attention_mask", "mask", (1, 32))])
    models["bert_tiny_b8"] = Spec(lambda: wf.BertEncoder(**tiny), 17,
                                  [ids("input_ids", 8, 32, 30522),
                                   ("attention_mask", "mask", (8, 32))])
    models["gpt2_small"] = Spec(wf.GptDecoder, 17, [ids("input_ids", 1, 128, 50257)])
    gpt_tiny = dict(vocab=5000, dim=128, layers=2, heads=4, max_len=256)
    models["gpt_tiny"] = Spec(lambda: wf.GptDecoder(**gpt_tiny), 17,
                              [ids("input_ids", 1, 32, 5000)])
    models["gpt_tiny_dynseq"] = Spec(lambda: wf.GptDecoder(**gpt_tiny), 17,
                                     [ids("input_ids", 2, 24, 5000)],
                                     dynamic={"input_ids": {0: "batch", 1: "sequence"}})
    models["encoder_decoder"] = Spec(wf.EncoderDecoder, 17,
                                     [ids("src_ids", 1, 32, 8000), ids("tgt_ids", 1, 24, 8000)])
    models["lstm_classifier"] = Spec(lambda: wf.RnnClassifier("lstm"), 13,
                                     [ids("input_ids", 1, 64, 20000)])
    models["gru_classifier"] = Spec(lambda: wf.RnnClassifier("gru"), 13,
                                    [ids("input_ids", 1, 64, 20000)])
    models["gru_classifier_b8"] = Spec(lambda: wf.RnnClassifier("gru"), 13,
                                       [ids("input_ids", 8, 64, 20000)])
    models["lstm_classifier_small"] = Spec(
        lambda: wf.RnnClassifier("lstm", vocab=1000, emb=32, hidden=48), 13,
        [ids("input_ids", 1, 16, 1000)])
    # Audio: a Whisper-like encoder on log-mel frames, wav2vec's convolutional feature encoder,
    # M5 and a WaveNet-style TCN on raw samples.
    models["speech_encoder"] = Spec(wf.SpeechEncoder, 17, [("input", "randn", (1, 80, 3000))])
    models["speech_encoder_small"] = Spec(
        lambda: wf.SpeechEncoder(dim=128, layers=2, heads=4, max_len=200), 17,
        [("input", "randn", (1, 80, 200))])
    models["wav2vec_features"] = Spec(wf.WaveformFeatures, 17, [("input", "randn", (1, 1, 16000))])
    models["audio_cnn_m5"] = Spec(wf.AudioCnn, 13, [("input", "randn", (1, 1, 16000))])
    models["audio_cnn_m5_small"] = Spec(lambda: wf.AudioCnn(width=32), 13,
                                        [("input", "randn", (1, 1, 8000))])
    models["tcn_wavenet"] = Spec(wf.Tcn, 13, [("input", "randn", (1, 1, 4096))])
    # Images in, images out.
    models["unet"] = Spec(wf.UNet, 13, image(1, 256))
    models["unet_bilinear"] = Spec(lambda: wf.UNet(base=16, bilinear=True), 13, image(1, 128))
    models["unet_small"] = Spec(lambda: wf.UNet(base=8, depth=3), 13, image(1, 64))
    models["dcgan_generator_128"] = Spec(lambda: wf.DcganGenerator(ups=5), 13,
                                         [("input", "randn", (1, 100, 1, 1))])
    models["conv3d_net"] = Spec(wf.Conv3dNet, 13, [("input", "randn", (1, 3, 16, 112, 112))])
    models["conv3d_net_small"] = Spec(lambda: wf.Conv3dNet(width=8), 13,
                                      [("input", "randn", (1, 3, 8, 32, 32))])
    return models


SETS = {"zoo": lambda: ZOO, "wide": wide_models}


def randomize_batch_norms(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
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


def make_input(kind, shape, high, gen):
    if kind == "randn":
        return torch.randn(*shape, generator=gen)
    if kind == "ids":
        return torch.randint(0, high, shape, generator=gen, dtype=torch.int64)
    mask = torch.ones(shape, dtype=torch.int64)
    mask[..., shape[-1] - shape[-1] // 4:] = 0
    return mask


def export(name, spec, out_dir, opset_override=None):
    torch.manual_seed(15)
    model = spec.make()
    gen = torch.Generator().manual_seed(1515)
    with torch.no_grad():
        randomize_batch_norms(model, gen)
        randomize_zero_weights(model, gen)
    if name.startswith("lraspp") and name in ZOO:
        model = FirstTensor(model, "out")
    model.eval()
    xs = [make_input(i[1], i[2], i[3] if len(i) > 3 else None, gen) for i in spec.inputs]
    names = [i[0] for i in spec.inputs]
    dynamic = dict(spec.dynamic)
    if 0 in dynamic.get(names[0], {}):
        dynamic["output"] = {0: dynamic[names[0]][0]}
    path = os.path.join(out_dir, name + ".onnx")
    with torch.set_grad_enabled(spec.trace_with_grad):
        torch.onnx.export(model, tuple(xs), path, opset_version=opset_override or spec.opset,
                          input_names=names, output_names=["output"],
                          dynamic_axes=dynamic or None, do_constant_folding=True)
    for n, x in zip(names, xs):
        np.save(os.path.join(out_dir, "%s.%s.npy" % (name, n)),
                x.numpy().astype(np.float32 if x.is_floating_point() else np.int64))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--set", choices=sorted(SETS), default="zoo")
    ap.add_argument("--only", action="append", metavar="NAME")
    ap.add_argument("--opset", type=int, help="export every model at this opset instead")
    ap.add_argument("--list", action="store_true", help="print the set's model names and exit")
    ap.add_argument("--keep-going", action="store_true",
                    help="report a model that does not export and go on with the others "
                         "(exit status 1 at the end)")
    args = ap.parse_args()
    models = SETS[args.set]()
    if args.list:
        print(" ".join(models))
        return 0
    if not args.out_dir:
        ap.error("OUT_DIR is required")
    for n in args.only or []:
        if n not in models:
            ap.error("the %s set has no model '%s' (names: %s)" % (args.set, n, " ".join(models)))
    os.makedirs(args.out_dir, exist_ok=True)
    failed = []
    for name in args.only or list(models):
        try:
            export(name, models[name], args.out_dir, args.opset)
        except Exception as e:  # noqa: BLE001  (an exporter failure of one model, reported)
            if not args.keep_going:
                raise
            print("make_zoo.py: %s does not export: %s: %s" % (name, type(e).__name__,
                                                                 str(e).splitlines()[0][:300]),
                  file=sys.stderr, flush=True)
            failed.append(name)
            continue
        print("exported", name, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
