"""The model zoo: public architectures with seeded random weights, exported to ONNX
once, then run by LightNet on each target and compared with ONNX Runtime.

    pip install -e ".[zoo]"                  # torch, torchvision, ultralytics, transformers
    python bench/zoo.py export               # every model not yet in the cache
    python bench/zoo.py export --models resnet18,yolov8n --cache /tmp/zoo
    python bench/zoo.py check                # needs lightnet, onnx, onnxruntime (no torch)
    python bench/zoo.py check --models yolov8n --target dnnl
    python bench/zoo.py list                 # the models, and the families of those exported
    python bench/run.py --zoo                # time them (see bench/run.py)

export (in an environment with the `zoo` extra) builds each model with its framework's
own default initialization, seeded by the model's name; every parameter the framework
sets to one constant (zero heads and biases, unit norm scales, 1e-6 layer scales) gets
U(-0.1, 0.1) added, and every batchnorm's running mean and variance (the DETRs' frozen
ones' too) are those of the model's own input (one pass over the image and its mirror
image): no batchnorm is an identity, and every layer's activations are near unit scale
and depend on the input, whatever the init (inception_v3's would grow to 1e12 under
unit statistics, and MobileNets' or YOLO's outputs would hardly depend on the image).

The model is exported in eval mode, batch 1 and static shapes, with torch.onnx's
TorchScript exporter at opset 17, to the cache (default ~/.cache/lightnet-zoo, or
$LIGHTNET_ZOO; --cache DIR) as NAME.onnx, its inputs as NAME.npz, and an entry in
manifest.json: name, family, file, inputs (names, shapes, dtypes), outputs, the largest
output magnitude, and the model's float32 noise, the error of torch's float32 outputs
against its float64 ones (float64 throughout: torch's default dtype too, for the
tensors a model makes itself), which two correct float32 engines may differ by too. A
model with an output not finite or all zero, or float64 outputs not finite (no noise to
measure), is not exported; models already in the manifest are skipped. torchvision's
models take 224x224 images (inception_v3 299x299; the segmentation models 224x224
rather than their 520x520 training crop), standard normal; its video classifiers
(VIDEO: r3d_18, mc3_18, r2plus1d_18, 3-D convolutions, and swin3d_t, shifted 3-D
windows) a `clip` of 16 frames of 112x112, [1, 3, 16, 112, 112], their training size,
standard normal; its optical flow model (OPTICAL_FLOW: raft_small, 12 refinements, each
sampling its correlation pyramid by GridSample) two 128x128 images, `image1` and
`image2`, standard normal, its 12 flow estimates the outputs.
ultralytics' YOLO models are built from their yaml (no weights, no network:
YOLO_OFFLINE) and take 320x320 images (224x224 for -cls; 640 is their default, 320
keeps the numpy target's runs short), uniform in [0, 1), their heads in export mode.
Not among them: RT-DETR (rtdetr-l; it imports and runs, GridSample and all), whose
decoder takes the 300 top-scoring of its anchors: with random weights many score
alike, and torch's float32 and float64 outputs differ by 0.84 (no tolerance tells
right from wrong).
The transformers models (bert, distilbert, gpt2 and TRANSFORMERS_TEXT: encoders
(nystromformer's and big_bird's among them), t5's encoder, the encoder-decoders of bart,
pegasus, marian, m2m100 and prophetnet, decoders from opt to olmo and mamba's state-space
model, the audio encoders of whisper, wav2vec2, data2vec_audio and speech_to_text, and
encodec's audio codec (convolutions and 2-layer LSTMs in its encoder and decoder, a
residual vector quantizer between them, its zero codebooks made standard normal); their
configs in TRANSFORMER_CONFIGS, eager attention, no key-value cache) take input_ids and
an attention_mask (the last 16 of 128 tokens padding), both int64 (bart's decoder reads
its input_ids shifted right, the model's default; pegasus', marian's, m2m100's and
prophetnet's decoders take those as decoder_input_ids, their start token first;
nystromformer's mask is float32 [1, 1, 1, 128], 0 or float32's lowest, added to its
attention scores), except whisper's encoder, which takes input_features, [1, 80, 3000]
(30 s of log-mel frames), speech_to_text's encoder input_features [1, 3000, 80] (30 s
of filterbank frames), and wav2vec2 and data2vec_audio, which take input_values,
[1, 16000] (1 s of 16 kHz audio), and encodec, which takes input_values [1, 1, 4800]
(0.2 s of 24 kHz audio; its outputs the codes and the decoded audio), all standard
normal. Not among them: CANINE (its attention mask is made in float32 whatever the
model's dtype: the float64 run, hence the float32 noise, is NaN), LED (its Longformer
attention's NonZero on the global-attention mask: LightNet refuses NonZero, whose
output shape depends on the data), and hubert,
starcoder2 and blenderbot_small (exported and checked, but wav2vec2's, mistral's and
bart's patterns again). bert-dynamic, distilbert-dynamic and gpt2-dynamic are
the same models (the same seeded weights) exported with dynamic batch and sequence
axes ("batch", "sequence": one ONNX model for any batch and sequence length), their
manifest entries saying so (`dynamic_axes`). The transformers vision models
(TRANSFORMERS_VISION: LeViT, ConvNeXt-V2, MobileViT, SegFormer, Swin-V2, DINOv2, BEiT,
PoolFormer, SwiftFormer, CvT, PVT-v2, FocalNet, Hiera, CLIP's and SigLIP's vision
towers, BiT, Depth Anything, DPT, YOLOS, MobileNet-V1, EfficientNet, MobileNet-V2
(`mobilenet_v2_hf`, beside torchvision's `mobilenet_v2`), RegNet, ResNet, GLPN,
ViT-MAE, data2vec-vision, ConvNeXt, Swin, DeiT, UperNet, DETR, Conditional DETR,
Table Transformer, Swin2SR, TextNet, HGNet-V2, ViTDet, DINOv3 ViT, Deformable DETR) are
their configs' defaults (base size or smaller; segformer is b0; dinov2 the dinov2-small
config, hidden 384, 6 heads, whose 518x518 position table is interpolated (bicubic) to the 224x224
image's 16x16 patches, as dpt's (384) and yolos' (512x864) are; beit with its relative
position bias on, as BEiT's released checkpoints have it, and vitdet its relative
position embeddings (its get_rel_pos, scripted while tracing, exports an ONNX If per
table, whose condition folds to a constant: LightNet imports the branch it takes);
dinov3_vit, ViT-S/16 (384 wide, 6 heads), with the 4 register tokens of DINOv3's
released ViTs (its RoPE embedding exports two such Ifs); efficientnet B0's
coefficients, the config's default being B7; data2vec_vision with the relative position
bias shared by all layers, as its released checkpoints have it; upernet's backbone
ConvNeXt-tiny; the DETRs' a ResNet-50 of transformers' own, not timm's, 100 queries,
Deformable DETR's 300 and four feature levels, its multi-scale deformable attention 48
GridSamples, exported with torch.linspace computed by numpy: _constant_linspace) and
take `pixel_values`, a seeded standard normal [1, 3, 224, 224] (mobilevit 256x256 and
swin2sr 64x64, their configs' sizes; upernet 192x192 and textnet 256x256, whose poolings
of the last map (upernet's 6x6 to 1, 2, 3 and 6 cells, textnet's 8x8 to 2) export, 7x7's
not); vit_mae takes its `noise` too, [1, 196] uniform in [0, 1), whose argsort picks the
quarter of the patches it keeps (else drawn at random in the graph). The outputs are the
base model's (last hidden state, pooled output where there is one) but segformer's,
dpt's and upernet's segmentation logits (dpt's depth head ends in a ReLU that zeroes
every random-weight output), yolos' and the DETRs' class logits and boxes (and last
hidden states), depth_anything's and glpn's depth, swin2sr's 2x upscaled image and
hgnet_v2's class logits (HGNet-V2 has no base model). Not among them: MobileViT-V2 (its
unfold's inverse, col2im, exports only at opset 18), DINOv2 with registers (its
antialiased bicubic position interpolation likewise), MaskFormer and Mask2Former (their
models build their losses' Hungarian matcher, which needs scipy, not in the zoo extra),
DiNAT (needs natten), VAN, EfficientFormer, NAT and ViT-hybrid (no longer in
transformers).

check runs every model of the manifest: ONNX Runtime's outputs are the reference, and
for each --target (default dnnl,cpu) LightNet imports the model, compiles it with its
weights, runs it and is compared output by output: the error is max|ours - ort| /
max|ort|, the worst output's, and must be <= 1e-4, or twice the model's float32 noise
where that is larger (tolerance); a model exported with dynamic axes is run at
batch 1 and sequences 16, 128 and 384, and batch 2 at 16, through one Session (a
plan per shape), each against ONNX Runtime. Every exception is one line (its
stage; a LightNetError's message, anything else with its type), and each model and
target runs in a child process (`check-one`) so that a crash is one row too. On dnnl,
any oneDNN implementation whose name starts with "ref" (a reference, unoptimized
kernel) is listed. The exit status is 1 when any model fails to import, errors, is
wrong or runs a ref kernel.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CACHE = os.environ.get("LIGHTNET_ZOO", os.path.expanduser("~/.cache/lightnet-zoo"))
TOLERANCE = 1e-4
OPSET = 17
CHECK_TIMEOUT = 1800  # seconds one model may take on one target

CLASSIFIERS = (
    "alexnet", "vgg11", "vgg16_bn", "resnet18", "resnet50", "resnext50_32x4d",
    "wide_resnet50_2", "densenet121", "squeezenet1_1", "inception_v3", "googlenet",
    "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "shufflenet_v2_x1_0",
    "mnasnet1_0", "efficientnet_b0", "efficientnet_v2_s", "regnet_x_400mf",
    "regnet_y_400mf", "convnext_tiny", "vit_b_16", "swin_t", "maxvit_t",
)
# torchvision's video classifiers: 3-D convolutions over [1, 3, 16, 112, 112] clips.
VIDEO = ("r3d_18", "mc3_18", "r2plus1d_18", "swin3d_t")
OPTICAL_FLOW = ("raft_small",)
SEGMENTERS = ("fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large")
YOLOS = (
    "yolov5n", "yolov8n", "yolov8n-seg", "yolov8n-pose", "yolov8n-obb", "yolov8n-cls",
    "yolov9t", "yolov10n", "yolo11n", "yolo11n-seg", "yolo11n-pose", "yolo11n-obb",
    "yolo11n-cls", "yolo12n", "yolo26n",
)
TRANSFORMERS = ("bert", "distilbert", "gpt2")
# More transformers architectures: encoders, a T5 encoder, a small Llama decoder,
# Whisper's audio encoder and EnCodec (see _transformer for their configs).
TRANSFORMERS_TEXT = ("roberta", "albert", "electra", "t5", "llama", "whisper", "opt", "bart",
                     "mistral", "phi", "gemma", "mpnet", "deberta", "bloom", "gpt_neo",
                     "funnel", "mobilebert", "squeezebert", "convbert", "xlnet", "wav2vec2",
                     "clip_text", "gpt_neox", "qwen2", "falcon", "nystromformer", "pegasus",
                     "big_bird", "rembert", "marian", "m2m100", "prophetnet", "data2vec_audio",
                     "speech_to_text", "mpt", "stablelm", "olmo", "mamba", "encodec")
TRANSFORMERS_VISION = (
    "levit", "convnextv2", "mobilevit", "segformer", "swinv2", "dinov2", "beit", "poolformer",
    "swiftformer", "cvt", "pvt_v2", "focalnet", "hiera", "clip_vision",
    "siglip_vision", "bit", "depth_anything", "dpt", "yolos", "mobilenet_v1", "efficientnet",
    "mobilenet_v2_hf", "regnet", "resnet", "glpn", "vit_mae", "data2vec_vision", "convnext",
    "swin", "deit", "upernet", "detr", "conditional_detr", "table_transformer", "swin2sr",
    "textnet", "hgnet_v2", "vitdet", "dinov3_vit", "deformable_detr",
)
# The same models (same weights) exported with dynamic batch and sequence axes.
DYNAMIC = "-dynamic"
TRANSFORMERS_DYNAMIC = tuple(name + DYNAMIC for name in TRANSFORMERS)
MODELS = (*CLASSIFIERS, *VIDEO, *OPTICAL_FLOW, *SEGMENTERS, *YOLOS, *TRANSFORMERS,
          *TRANSFORMERS_DYNAMIC, *TRANSFORMERS_TEXT, *TRANSFORMERS_VISION)


def one_line(e: BaseException) -> str:
    """An exception as one line: a LightNetError's message; anything else (known by
    name: export runs without lightnet) with its type and the innermost line of this
    repository its traceback passes through."""
    text = " ".join(str(e).split())
    if not any(c.__name__ == "LightNetError" for c in type(e).__mro__):
        ours = [f for f in traceback.extract_tb(e.__traceback__)
                if f.filename.startswith(ROOT + os.sep)]
        if ours:
            text += f" (at {os.path.relpath(ours[-1].filename, ROOT)}:{ours[-1].lineno})"
        text = f"{type(e).__name__}: {text}"
    return text[:500]


def rel_error(ours: np.ndarray, ref: np.ndarray) -> float:
    """max |ours - ref| / max |ref| (inf when either is not finite)."""
    ours, ref = ours.astype(np.float64), ref.astype(np.float64)
    if not (np.all(np.isfinite(ours)) and np.all(np.isfinite(ref))):
        return math.inf
    return float(np.max(np.abs(ours - ref), initial=0) / max(np.max(np.abs(ref), initial=0), 1e-30))


# export (torch) --------------------------------------------------------------------------

def _image(name: str, size: int, low=None, frames=None) -> np.ndarray:
    """A seeded [1, 3, size, size] image (a [1, 3, frames, size, size] clip): standard
    normal, or uniform in [low, 1)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    shape = (1, 3) + ((frames,) if frames else ()) + (size, size)
    if low is None:
        return rng.standard_normal(shape, dtype=np.float32)
    return rng.uniform(low, 1.0, shape).astype(np.float32)


def _torchvision(name: str):
    import torchvision

    if name in SEGMENTERS:
        model = torchvision.models.get_model(name, weights=None, weights_backbone=None)
        return model, {"image": _image(name, 224)}, "torchvision segmentation"
    if name in VIDEO:
        model = torchvision.models.get_model(name, weights=None)
        return model, {"clip": _image(name, 112, frames=16)}, "torchvision video"
    if name in OPTICAL_FLOW:
        import torch
        from torchvision.models.optical_flow import raft

        # Its pixel grid is float32 whatever the model's dtype: the default dtype's, for
        # the float64 run (the same integers either way).
        grid = raft.make_coords_grid
        raft.make_coords_grid = lambda *a, **k: grid(*a, **k).to(torch.get_default_dtype())
        model = torchvision.models.get_model(name, weights=None)
        frames = {"image1": _image(name + "1", 128), "image2": _image(name + "2", 128)}
        return model, frames, "torchvision optical flow"
    extra = {"init_weights": True} if name in ("googlenet", "inception_v3") else {}
    model = torchvision.models.get_model(name, weights=None, **extra)
    size = 299 if name == "inception_v3" else 224
    return model, {"image": _image(name, size)}, "torchvision classification"


def _yolo(name: str):
    from ultralytics import YOLO

    model = YOLO(f"{name}.yaml", verbose=False).model
    size = 224 if model.task == "classify" else 320
    return model, {"images": _image(name, size, low=0.0)}, f"ultralytics {model.task}"


# name: (config class, model class, config arguments beyond its defaults). Defaults are
# base size or smaller (electra's is small, t5's is t5-small, whisper's is tiny, opt's
# is opt-125m, bloom's is 2 layers of 64, mobilebert's is mobilebert-uncased) except
# where they are large: albert's (xxlarge), bart's and xlnet's (large) and
# deberta's (xlarge) become base size (deberta's that of deberta-v3-base: relative
# attention, both position terms, 256 log-spaced position buckets, no absolute
# positions); the decoders' (1.3B to 20B) 4 layers of 512 with 8 heads, keeping each
# one's features: llama's RMSNorm, rotary positions, SiLU-gated MLP, causal mask and 2
# key-value heads (grouped-query attention); mistral's the same with a sliding window of
# 64 (of the 128 tokens); phi's LayerNorm, rotary positions on half of each head,
# parallel attention and MLP; gemma's one key-value head (multi-query), GELU-gated MLP,
# (1 + w) RMSNorm and a 32000-token vocabulary (not 256000: 0.5 GB of embeddings);
# qwen2's biased query, key and value projections, 2 key-value heads and a 32000-token
# vocabulary; gpt_neox's rotary positions on a quarter of each head and parallel
# residuals; falcon's one key-value head and parallel attention and MLP; gpt_neo's
# global and local attention layers in turn, its local window 32 (not 256: within the
# 128 tokens). clip_text's position table is 128 long (not 77) for the 128 tokens.
# nystromformer's segment means span the 128 tokens (64 landmarks of 2 tokens each);
# big_bird's attention is full ("original_full": its block-sparse one falls back to full
# below 704 tokens anyway); pegasus', m2m100's (32000-token vocabulary) and prophetnet's
# encoder-decoders are base size as bart's, marian's that of the opus-mt models (512
# wide, 6 + 6 layers, 8 heads); rembert is base size with its 256-wide input embeddings
# and a 32000-token vocabulary. The decoders: mpt's ALiBi and bias-free LayerNorm;
# stablelm's LayerNorm on each head's query and key (qk_layernorm) and rotary positions
# on a quarter of each head; olmo's LayerNorm without weights and its query, key and
# value clipped to [-1, 1] (8 or none in OLMo's releases; 1 clips about 3% of these random
# weights' queries); mamba's 4 selective state-space layers of 768 (no attention).
# encodec's is its config's default, the 24 kHz model (LSTMs of 512 over the 75 Hz
# frames, 1024-entry codebooks, 2 of them at its default 1.5 kbps).
_DECODER = {"hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8}
_SEQ2SEQ = {"d_model": 768, "encoder_layers": 6, "decoder_layers": 6,
            "encoder_attention_heads": 12, "decoder_attention_heads": 12,
            "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072}
# Encoder-decoders whose base model does not shift input_ids right for its decoder (bart's
# does): that decoder input is an input of its own.
DECODER_INPUTS = ("pegasus", "marian", "m2m100", "prophetnet")
# transformers' own [batch, 1, query, key] mask does not broadcast over nystromformer's
# 64 landmark queries: its mask is an input [batch, 1, 1, key], added to the scores as
# is (the model's mask before transformers' masking rework).
ADDITIVE_MASK = ("nystromformer",)
AUDIO = ("wav2vec2", "data2vec_audio")  # input_values, 1 s of 16 kHz audio
TRANSFORMER_CONFIGS = {
    "bert": ("BertConfig", "BertModel", {}),
    "distilbert": ("DistilBertConfig", "DistilBertModel", {}),
    "gpt2": ("GPT2Config", "GPT2Model", {}),
    "roberta": ("RobertaConfig", "RobertaModel", {}),
    "albert": ("AlbertConfig", "AlbertModel",
               {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072}),
    "electra": ("ElectraConfig", "ElectraModel", {}),
    "t5": ("T5Config", "T5EncoderModel", {}),
    "llama": ("LlamaConfig", "LlamaModel",
              {**_DECODER, "num_key_value_heads": 2, "intermediate_size": 1376}),
    "whisper": ("WhisperConfig", "WhisperModel", {}),
    "opt": ("OPTConfig", "OPTModel", {}),
    "bart": ("BartConfig", "BartModel",
             {"d_model": 768, "encoder_layers": 6, "decoder_layers": 6,
              "encoder_attention_heads": 12, "decoder_attention_heads": 12,
              "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072}),
    "mistral": ("MistralConfig", "MistralModel",
                {**_DECODER, "num_key_value_heads": 2, "head_dim": 64,
                 "intermediate_size": 1376, "sliding_window": 64}),
    "phi": ("PhiConfig", "PhiModel", {**_DECODER, "intermediate_size": 2048}),
    "gemma": ("GemmaConfig", "GemmaModel",
              {**_DECODER, "num_key_value_heads": 1, "head_dim": 64,
               "intermediate_size": 2048, "vocab_size": 32000}),
    "mpnet": ("MPNetConfig", "MPNetModel", {}),
    "deberta": ("DebertaV2Config", "DebertaV2Model",
                {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "intermediate_size": 3072, "relative_attention": True,
                 "pos_att_type": ["p2c", "c2p"], "position_buckets": 256,
                 "norm_rel_ebd": "layer_norm", "share_att_key": True,
                 "position_biased_input": False, "type_vocab_size": 0}),
    "bloom": ("BloomConfig", "BloomModel", {}),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoModel",
                {"hidden_size": 512, "num_layers": 4, "num_heads": 8, "window_size": 32,
                 "attention_types": [[["global", "local"], 2]]}),
    "funnel": ("FunnelConfig", "FunnelModel", {}),
    "mobilebert": ("MobileBertConfig", "MobileBertModel", {}),
    "squeezebert": ("SqueezeBertConfig", "SqueezeBertModel", {}),
    "convbert": ("ConvBertConfig", "ConvBertModel", {}),
    "xlnet": ("XLNetConfig", "XLNetModel",
              {"d_model": 768, "n_layer": 12, "n_head": 12, "d_inner": 3072,
               "use_mems_eval": False}),
    "wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", {}),
    "clip_text": ("CLIPTextConfig", "CLIPTextModel", {"max_position_embeddings": 128}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXModel", {**_DECODER, "intermediate_size": 2048}),
    "qwen2": ("Qwen2Config", "Qwen2Model",
              {**_DECODER, "num_key_value_heads": 2, "intermediate_size": 1376,
               "vocab_size": 32000}),
    "falcon": ("FalconConfig", "FalconModel", _DECODER),
    "nystromformer": ("NystromformerConfig", "NystromformerModel",
                      {"segment_means_seq_len": 128}),
    "pegasus": ("PegasusConfig", "PegasusModel", _SEQ2SEQ),
    "big_bird": ("BigBirdConfig", "BigBirdModel", {"attention_type": "original_full"}),
    "rembert": ("RemBertConfig", "RemBertModel",
                {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "intermediate_size": 3072, "vocab_size": 32000}),
    "marian": ("MarianConfig", "MarianModel",
               {"d_model": 512, "encoder_layers": 6, "decoder_layers": 6,
                "encoder_attention_heads": 8, "decoder_attention_heads": 8,
                "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048}),
    "m2m100": ("M2M100Config", "M2M100Model", {**_SEQ2SEQ, "vocab_size": 32000}),
    "prophetnet": ("ProphetNetConfig", "ProphetNetModel",
                   {"hidden_size": 768, "num_encoder_layers": 6, "num_decoder_layers": 6,
                    "num_encoder_attention_heads": 12, "num_decoder_attention_heads": 12,
                    "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072}),
    "data2vec_audio": ("Data2VecAudioConfig", "Data2VecAudioModel", {}),
    "speech_to_text": ("Speech2TextConfig", "Speech2TextModel", {}),
    "mpt": ("MptConfig", "MptModel", _DECODER),
    "stablelm": ("StableLmConfig", "StableLmModel",
                 {**_DECODER, "num_key_value_heads": 8, "intermediate_size": 1376,
                  "qk_layernorm": True}),
    "olmo": ("OlmoConfig", "OlmoModel",
             {**_DECODER, "intermediate_size": 1376, "clip_qkv": 1.0}),
    "mamba": ("MambaConfig", "MambaModel", {"num_hidden_layers": 4}),
    "encodec": ("EncodecConfig", "EncodecModel", {}),
}


def _transformer(name: str):
    import transformers

    config, cls, extra = TRANSFORMER_CONFIGS[name]
    config = getattr(transformers, config)(attn_implementation="eager", use_cache=False, **extra)
    model = getattr(transformers, cls)(config)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name == "whisper":  # the encoder alone, on 30 s of 80 log-mel features
        features = rng.standard_normal((1, config.num_mel_bins, 3000), dtype=np.float32)
        return model.get_encoder(), {"input_features": features}, "transformers"
    if name == "speech_to_text":  # the encoder alone, on 30 s of 80 filterbank features
        features = rng.standard_normal((1, 3000, config.input_feat_per_channel),
                                       dtype=np.float32)
        return model.get_encoder(), {"input_features": features}, "transformers"
    if name == "encodec":  # 0.2 s of 24 kHz audio, mono: 15 frames of 320 samples
        import torch

        # The codebooks are zero buffers (k-means fills them in training), not parameters
        # _randomize would touch: standard normal entries, so the codes are not all 0.
        with torch.no_grad():
            for vq in model.quantizer.layers:
                vq.codebook.embed.normal_()
        audio = rng.standard_normal((1, config.audio_channels, 4800), dtype=np.float32)
        return model, {"input_values": audio}, "transformers"
    if name in AUDIO:
        return model, {"input_values": rng.standard_normal((1, 16000), dtype=np.float32)}, \
            "transformers"
    mask = np.ones((1, 128), np.int64)
    mask[:, -16:] = 0
    ids = rng.integers(0, config.vocab_size, (1, 128), dtype=np.int64)
    inputs = {"input_ids": ids, "attention_mask": mask}
    if name in ADDITIVE_MASK:  # 0 where attended, float32's lowest where padding
        inputs["attention_mask"] = np.where(mask, 0, np.finfo(np.float32).min).astype(
            np.float32)[:, None, None, :]
    if name in DECODER_INPUTS:
        start = np.full((1, 1), config.decoder_start_token_id, np.int64)
        inputs["decoder_input_ids"] = np.concatenate([start, ids[:, :-1]], axis=1)
    return model, inputs, "transformers"


# name: (config class, its arguments, model class). Base models (every token's or pixel's
# features are outputs) but those whose heads are their architectures' own part
# (segmentation, depth, detection, super-resolution) and hgnet_v2, which has no base model.
VISION = {
    "levit": ("LevitConfig", {}, "LevitModel"),
    "convnextv2": ("ConvNextV2Config", {}, "ConvNextV2Model"),
    "mobilevit": ("MobileViTConfig", {}, "MobileViTModel"),
    "segformer": ("SegformerConfig", {}, "SegformerForSemanticSegmentation"),
    "swinv2": ("Swinv2Config", {}, "Swinv2Model"),
    "dinov2": ("Dinov2Config", {"hidden_size": 384, "num_attention_heads": 6,
                                "image_size": 518}, "Dinov2Model"),
    "beit": ("BeitConfig", {"use_relative_position_bias": True}, "BeitModel"),
    "poolformer": ("PoolFormerConfig", {}, "PoolFormerModel"),
    "swiftformer": ("SwiftFormerConfig", {}, "SwiftFormerModel"),
    "cvt": ("CvtConfig", {}, "CvtModel"),
    "pvt_v2": ("PvtV2Config", {}, "PvtV2Model"),
    "focalnet": ("FocalNetConfig", {}, "FocalNetModel"),
    "hiera": ("HieraConfig", {}, "HieraModel"),
    "clip_vision": ("CLIPVisionConfig", {}, "CLIPVisionModel"),
    "siglip_vision": ("SiglipVisionConfig", {}, "SiglipVisionModel"),
    "bit": ("BitConfig", {}, "BitModel"),
    "depth_anything": ("DepthAnythingConfig", {}, "DepthAnythingForDepthEstimation"),
    "dpt": ("DPTConfig", {}, "DPTForSemanticSegmentation"),
    "yolos": ("YolosConfig", {}, "YolosForObjectDetection"),
    "mobilenet_v1": ("MobileNetV1Config", {}, "MobileNetV1Model"),
    # EfficientNetConfig's default is B7 (600x600, 64 blocks): B0's coefficients here.
    "efficientnet": ("EfficientNetConfig", {"width_coefficient": 1.0, "depth_coefficient": 1.0,
                                            "image_size": 224, "hidden_dim": 1280},
                     "EfficientNetModel"),
    "mobilenet_v2_hf": ("MobileNetV2Config", {}, "MobileNetV2Model"),
    "regnet": ("RegNetConfig", {}, "RegNetModel"),
    "resnet": ("ResNetConfig", {}, "ResNetModel"),
    "glpn": ("GLPNConfig", {}, "GLPNForDepthEstimation"),
    "vit_mae": ("ViTMAEConfig", {}, "ViTMAEModel"),
    "data2vec_vision": ("Data2VecVisionConfig", {"use_shared_relative_position_bias": True},
                        "Data2VecVisionModel"),
    "convnext": ("ConvNextConfig", {}, "ConvNextModel"),
    "swin": ("SwinConfig", {}, "SwinModel"),
    "deit": ("DeiTConfig", {}, "DeiTModel"),
    # ConvNeXt-tiny's backbone; its hidden sizes given as a list (ConvNextBackbone
    # prepends a list to them, and the config's default is a tuple).
    "upernet": ("UperNetConfig", {"backbone_config": {
        "model_type": "convnext", "hidden_sizes": [96, 192, 384, 768],
        "out_features": ["stage1", "stage2", "stage3", "stage4"]}},
                "UperNetForSemanticSegmentation"),
    "detr": ("DetrConfig", {"use_timm_backbone": False, "use_pretrained_backbone": False},
             "DetrForObjectDetection"),
    "conditional_detr": ("ConditionalDetrConfig", {"use_timm_backbone": False,
                                                   "use_pretrained_backbone": False},
                         "ConditionalDetrForObjectDetection"),
    "deformable_detr": ("DeformableDetrConfig", {"use_timm_backbone": False,
                                                 "use_pretrained_backbone": False},
                        "DeformableDetrForObjectDetection"),
    "table_transformer": ("TableTransformerConfig", {"use_timm_backbone": False,
                                                     "use_pretrained_backbone": False},
                          "TableTransformerForObjectDetection"),
    "swin2sr": ("Swin2SRConfig", {}, "Swin2SRForImageSuperResolution"),
    "textnet": ("TextNetConfig", {}, "TextNetModel"),
    "hgnet_v2": ("HGNetV2Config", {}, "HGNetV2ForImageClassification"),
    "vitdet": ("VitDetConfig", {"use_relative_position_embeddings": True}, "VitDetModel"),
    "dinov3_vit": ("DINOv3ViTConfig", {"num_register_tokens": 4}, "DINOv3ViTModel"),
}


def _vision_transformer(name: str):
    import transformers

    config, kwargs, cls = VISION[name]
    config = getattr(transformers, config)(attn_implementation="eager", **kwargs)
    model = getattr(transformers, cls)(config)
    # upernet's pyramid pools its last 1/32 map to 1, 2, 3 and 6 cells: 6x6 at 192x192;
    # textnet's pooler to 2x2: 8x8 at 256x256 (ONNX's export pools only by whole factors).
    size = {"mobilevit": 256, "upernet": 192, "swin2sr": 64, "textnet": 256}.get(name, 224)
    inputs = {"pixel_values": _image(name, size)}
    if name == "vit_mae":  # the noise whose argsort picks the unmasked patches
        rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
        patches = (size // config.patch_size) ** 2
        inputs["noise"] = rng.uniform(0, 1, (1, patches)).astype(np.float32)
    return model, inputs, "transformers vision"


def _build(name: str):
    """(model, {input name: array}, family) with the framework's initialization."""
    if name in YOLOS:
        return _yolo(name)
    if name in TRANSFORMERS or name in TRANSFORMERS_TEXT:
        return _transformer(name)
    if name in TRANSFORMERS_DYNAMIC:
        return _transformer(name[:-len(DYNAMIC)])
    if name in TRANSFORMERS_VISION:
        return _vision_transformer(name)
    return _torchvision(name)


def _frozen_stats(module, args) -> None:
    """A frozen batchnorm's statistics become those of its input (a forward pre-hook)."""
    x = args[0]
    module.running_mean.copy_(x.mean((0, 2, 3)))
    module.running_var.copy_(x.var((0, 2, 3), unbiased=False))


def _randomize(torch, model, inputs: dict, seed: int) -> None:
    """Every parameter that holds one constant value gets U(-0.1, 0.1) added; every
    batchnorm's running statistics become those of one pass over the image and its
    mirror image (the batchnorms alone in training mode). The DETRs' frozen batchnorms
    keep their scale, shift and statistics in buffers, not parameters: they are treated
    the same way (else each is an identity)."""
    gen = torch.Generator().manual_seed(seed)
    frozen = [m for m in model.modules() if type(m).__name__.endswith("FrozenBatchNorm2d")]
    constants = [*model.parameters(), *(t for m in frozen for t in (m.weight, m.bias))]
    with torch.no_grad():
        for p in constants:
            if p.is_floating_point() and bool((p == p.flatten()[0]).all()):
                p.add_(torch.rand(p.shape, generator=gen) * 0.2 - 0.1)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms and not frozen:
        return
    model.eval()
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # the running statistics become the batch's
        m.train()
    hooks = [m.register_forward_pre_hook(_frozen_stats) for m in frozen]
    with torch.no_grad():
        model(*(torch.cat([x, x.flip(-1)]) for x in map(torch.from_numpy, inputs.values())))
    for h in hooks:
        h.remove()
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    model.eval()


def _export_mode(model) -> None:
    """Ultralytics' heads in export mode, as its own ONNX export sets them: decoded
    boxes (+ masks or keypoints) in one tensor, softmax scores for -cls; C2f's split
    form. yolov10 and yolo26 keep their one-to-many head: the end-to-end one's top 300
    of near-tied random scores would change with float32 rounding."""
    from ultralytics.nn.modules import C2f, Classify, Detect

    for m in model.modules():
        if isinstance(m, (Classify, Detect)):
            m.export, m.format, m.dynamic, m.shape = True, "onnx", False, None
        elif isinstance(m, C2f):
            m.forward = m.forward_split


def _flat(y) -> list:
    """A model's outputs as a flat list of tensors (tuples, lists, dicts unpacked)."""
    if isinstance(y, dict):
        y = list(y.values())
    if isinstance(y, (tuple, list)):
        return [t for v in y for t in _flat(v)]
    return [y]


# Models whose export needs torch.linspace's values held as constants (_constant_linspace).
CONSTANT_LINSPACE = ("deformable_detr",)


def _constant_linspace(torch):
    """torch.linspace computed by numpy, so that the export holds its values: torch.onnx's
    TorchScript exporter writes a linspace as double whatever its dtype, and NaN for one
    step ((end - start) / (steps - 1)). Deformable DETR's encoder reference points, and
    with them its sampling grids, were double beside float32 values (a GridSample ONNX
    Runtime has no kernel for), and NaN at its 1x1 feature level."""
    def linspace(start, end, steps, *, dtype=None, device=None):
        values = torch.from_numpy(np.linspace(float(start), float(end), int(steps)))
        return values.to(dtype=dtype or torch.get_default_dtype(), device=device)
    return linspace


def export_one(name: str, cache: str) -> dict:
    """Build, randomize and export model `name` to `cache`; its manifest entry."""
    import torch

    seed = zlib.crc32(name.removesuffix(DYNAMIC).encode())  # -dynamic: the same weights
    torch.manual_seed(seed)
    model, inputs, family = _build(name)
    _randomize(torch, model, inputs, seed + 1)
    model.eval()
    if family.startswith("ultralytics"):
        _export_mode(model)
    names = list(inputs)

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *xs):
            return tuple(_flat(self.model(**dict(zip(names, xs)))
                               if family.startswith("transformers") else self.model(*xs)))

    flat = Flat().eval()
    args = tuple(torch.from_numpy(a) for a in inputs.values())
    with torch.no_grad():
        ys = flat(*args)
    outputs = ["output"] if len(ys) == 1 else [f"output{i}" for i in range(len(ys))]
    largest = [float(y.abs().max()) for y in ys]
    if not all(math.isfinite(v) and v > 0 for v in largest):  # zeros would check nothing
        raise ValueError(f"outputs not finite or all zero: max |y| {largest}")
    path = os.path.join(cache, f"{name}.onnx")
    dynamic = None
    if name.endswith(DYNAMIC):  # inputs [batch, sequence]; outputs [batch, (sequence,) ...]
        sequence = args[0].shape[1]
        dynamic = {n: {0: "batch", 1: "sequence"} for n in names}
        dynamic.update({n: {0: "batch", 1: "sequence"} if y.dim() >= 2 and y.shape[1] == sequence
                        else {0: "batch"} for n, y in zip(outputs, ys)})
    linspace = torch.linspace
    if name in CONSTANT_LINSPACE:
        torch.linspace = _constant_linspace(torch)
    try:
        torch.onnx.export(flat, args, path + ".part", input_names=names, output_names=outputs,
                          opset_version=OPSET, dynamo=False, do_constant_folding=True,
                          dynamic_axes=dynamic)
    finally:
        torch.linspace = linspace
    os.replace(path + ".part", path)
    np.savez(os.path.join(cache, f"{name}.npz"), **inputs)
    # float64 throughout: tensors the model makes itself (masks from its int64 input) too
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with torch.no_grad():
            exact = flat.double()(*(a.double() if a.is_floating_point() else a for a in args))
    finally:
        torch.set_default_dtype(default)
    noise = max(rel_error(y.numpy(), y64.numpy()) for y, y64 in zip(ys, exact))
    if not math.isfinite(noise):  # an infinite tolerance would pass any output
        raise ValueError("float64 outputs not finite: no float32 noise to measure")
    return {"name": name, "family": family, "file": f"{name}.onnx", "data": f"{name}.npz",
            "inputs": [{"name": n, "shape": list(a.shape), "dtype": str(a.dtype)}
                       for n, a in inputs.items()],
            "outputs": outputs, "max_abs_output": largest, "float32_noise": noise,
            **({"dynamic_axes": dynamic} if dynamic else {})}


def export(names, cache: str) -> int:
    os.makedirs(cache, exist_ok=True)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_VERBOSE", "False")
    os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(cache, "ultralytics"))
    import warnings

    warnings.filterwarnings("ignore")
    manifest = read_manifest(cache, missing_ok=True)
    failed = []
    for name in names:
        if name in manifest and os.path.exists(os.path.join(cache, manifest[name]["file"])):
            print(f"{name}: already exported", flush=True)
            continue
        t = time.perf_counter()
        try:
            entry = export_one(name, cache)
        except Exception as e:  # noqa: BLE001 - one line per model, then the next one
            failed.append(name)
            print(f"{name}: export failed: {one_line(e)}", flush=True)
            continue
        entry["export_seconds"] = round(time.perf_counter() - t, 1)
        manifest = read_manifest(cache, missing_ok=True)  # another export's entries kept
        manifest[name] = entry
        write_manifest(cache, manifest)
        print(f"{name}: {entry['family']}, outputs {entry['outputs']} max |y| "
              f"{', '.join(f'{v:.3g}' for v in entry['max_abs_output'])}, float32 noise "
              f"{entry['float32_noise']:.1e} ({entry['export_seconds']} s)", flush=True)
    if failed:
        print(f"export failed: {', '.join(failed)}")
    return 1 if failed else 0


# the manifest ---------------------------------------------------------------------------

def read_manifest(cache: str, missing_ok: bool = False) -> dict:
    """{name: entry} of the models exported to `cache`, in MODELS' order."""
    path = os.path.join(cache, "manifest.json")
    if not os.path.exists(path):
        if missing_ok:
            return {}
        raise FileNotFoundError(f"{path}: no zoo here (run: bench/zoo.py export)")
    with open(path) as f:
        return {e["name"]: e for e in json.load(f)["models"]}


def write_manifest(cache: str, manifest: dict) -> None:
    order = {n: i for i, n in enumerate(MODELS)}
    entries = sorted(manifest.values(), key=lambda e: order.get(e["name"], len(order)))
    with open(os.path.join(cache, "manifest.json.part"), "w") as f:
        json.dump({"opset": OPSET, "models": entries}, f, indent=1)
    os.replace(os.path.join(cache, "manifest.json.part"), os.path.join(cache, "manifest.json"))


def inputs_of(cache: str, entry: dict) -> dict:
    """{input name: array} the model was exported with."""
    with np.load(os.path.join(cache, entry["data"])) as data:
        return {i["name"]: data[i["name"]] for i in entry["inputs"]}


# check (lightnet, onnxruntime) ------------------------------------------------------------

def ref_kernels(ctx) -> list[str]:
    """The ref (unoptimized) oneDNN implementations ctx's loaded ops run: "impl (optype)"
    with counts (the impl_info lightnet.archs.dnnl.ops.describe_kernels lists)."""
    counts: dict[str, int] = {}
    for op in ctx.ops:
        info = getattr(op.values.get("call"), "impl_info", None)
        if info is not None and info.startswith("ref"):
            key = f"{info} ({op.optype})"
            counts[key] = counts.get(key, 0) + 1
    return [f"{k} x{n}" for k, n in counts.items()]


def tolerance(entry: dict) -> float:
    """What a model's outputs must agree with ONNX Runtime's to: TOLERANCE, or twice the
    model's own float32 noise where that is larger (fcn_resnet50: torch's float32
    against its float64 1.0e-4; ONNX Runtime against itself, graph optimizations on
    and off, 1.07e-4)."""
    return max(TOLERANCE, 2 * entry["float32_noise"])


# The (batch, sequence) shapes a model exported with dynamic axes is checked at, through
# one Session: a plan per shape.
DYNAMIC_SHAPES = ((1, 16), (1, 128), (1, 384), (2, 16))


def dynamic_feeds(entry: dict, feed: dict) -> list[dict]:
    """The inputs of a model exported with dynamic axes at each of DYNAMIC_SHAPES:
    token ids drawn from those it was exported with (so in its vocabulary), masks
    whose last quarter of each row but the first is padding."""
    rng = np.random.default_rng(0)
    ids, = (a for n, a in feed.items() if "mask" not in n)
    feeds = []
    for batch, sequence in DYNAMIC_SHAPES:
        mask = np.ones((batch, sequence), np.int64)
        mask[1:, sequence - sequence // 4:] = 0
        feeds.append({n: (rng.choice(ids.reshape(-1), (batch, sequence)) if "mask" not in n
                          else mask).astype(a.dtype) for n, a in feed.items()})
    return feeds


def check_one(cache: str, entry: dict, target: str) -> dict:
    """Model `entry` on `target` against ONNX Runtime: {"status": ok | wrong | refused |
    error, "err", "message", "ref", "seconds"}; every exception caught, with its stage.
    A model exported with dynamic axes runs each shape of DYNAMIC_SHAPES through one
    Session (its error the worst shape's)."""
    import onnxruntime as ort

    import lightnet
    from lightnet.frontends.onnx import convert

    t = time.perf_counter()
    result = {"status": "error", "err": None, "message": "", "ref": []}
    path = os.path.join(cache, entry["file"])
    feed = inputs_of(cache, entry)
    feeds = dynamic_feeds(entry, feed) if entry.get("dynamic_axes") else [feed]
    stage = "import"
    try:
        ir, weights = convert(path)
        stage = "ort"
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        refs = [dict(zip([o.name for o in sess.get_outputs()], sess.run(None, f)))
                for f in feeds]
        stage = "compile"
        session = lightnet.Session(ir, target=target, datafile=weights)
        errs = []
        for f, ref in zip(feeds, refs):
            stage = "run"
            outputs = session.run(f)
            if target == "dnnl":
                result["ref"] = sorted(set(result["ref"]) | set(ref_kernels(session.ctx)))
            stage = "compare"
            for name, want in ref.items():
                have = outputs[name]
                if have.shape != want.shape:
                    raise ValueError(f"output {name}: shape {list(have.shape)}, ONNX "
                                     f"Runtime's {list(want.shape)}")
                errs.append(rel_error(have, want))
        result["err"] = max(errs)
        result["status"] = "ok" if result["err"] <= tolerance(entry) else "wrong"
    except Exception as e:  # noqa: BLE001 - every failure is a row of the table
        result["status"] = "refused" if stage == "import" else "error"
        result["message"] = f"{stage}: {one_line(e)}"
    result["seconds"] = round(time.perf_counter() - t, 1)
    return result


def check_child(cache: str, name: str, target: str) -> dict:
    """check_one in a child process (a crash or a hang is a result too)."""
    cmd = [sys.executable, os.path.abspath(__file__), "check-one", name, target,
           "--cache", cache]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"status": "error", "err": None, "ref": [], "seconds": CHECK_TIMEOUT,
                "message": f"timeout: more than {CHECK_TIMEOUT} s"}
    lines = p.stdout.strip().splitlines()
    if p.returncode == 0 and lines:
        return json.loads(lines[-1])
    why = f"signal {-p.returncode}" if p.returncode < 0 else f"exit status {p.returncode}"
    tail = (p.stderr.strip().splitlines() or [""])[-1]
    return {"status": "error", "err": None, "ref": [], "message": f"crash: {why} {tail}".strip(),
            "seconds": round(time.perf_counter() - t, 1)}


def _cell(r: dict) -> str:
    if r["status"] in ("ok", "wrong"):
        return f"{'ok' if r['status'] == 'ok' else 'WRONG'} {r['err']:.1e}"
    return "refused" if r["status"] == "refused" else f"ERROR ({r['message'].split(':')[0]})"


def check(names, cache: str, targets) -> int:
    """Check every model of `names`, print the table and the error lines; 0 if all pass."""
    manifest = read_manifest(cache)
    rows, notes, bad = [], [], 0
    for name in names:
        entry = manifest[name]
        results = {tg: check_child(cache, name, tg) for tg in targets}
        first = next(iter(results.values()))
        crashed = all(r["message"].startswith(("crash", "timeout")) for r in results.values())
        imported = "no" if first["status"] == "refused" else "?" if crashed else "yes"
        refs = results.get("dnnl", {}).get("ref", [])
        rows.append([name, entry["family"], f"{entry['float32_noise']:.0e}", imported,
                     *(_cell(r) for r in results.values()), "; ".join(refs) or "-",
                     f"{sum(r['seconds'] for r in results.values()):.0f}"])
        if first["status"] == "refused":
            notes.append(f"{name}: refused at {first['message']}")
        else:
            notes += [f"{name} ({tg}): {r['message']}" for tg, r in results.items()
                      if r["message"]]
        bad += any(r["status"] != "ok" for r in results.values()) or bool(refs)
        print(f"  {' | '.join(rows[-1])}", file=sys.stderr, flush=True)
    head = ["model", "family", "f32 noise", "import", *targets, "ref kernels (dnnl)", "s"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for cells in [head, ["-" * w for w in widths], *rows]:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |")
    print(f"\n{len(rows) - bad} of {len(rows)} models pass on {', '.join(targets)}: error "
          f"(max|ours - ort| / max|ort|, the worst output's) <= {TOLERANCE:g} (or twice the "
          "model's f32 noise where larger), no ref kernel. "
          "f32 noise: torch's float32 outputs against its float64 ones, what two correct "
          "float32 engines may differ by.")
    if notes:
        print("\n" + "\n".join(notes))
    return 1 if bad else 0


def _names(arg, known) -> list[str]:
    if not arg:
        return list(known)
    names = [n.strip() for n in arg.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"zoo.py: unknown models {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("export", "check", "list", "check-one"))
    p.add_argument("args", nargs="*", help="check-one: MODEL TARGET")
    p.add_argument("--models", help="comma-separated subset (default: all)")
    p.add_argument("--target", default="dnnl,cpu", help="check: LightNet's targets (dnnl,cpu)")
    p.add_argument("--cache", default=DEFAULT_CACHE,
                   help=f"where the models are exported (default {DEFAULT_CACHE})")
    a = p.parse_args(argv)
    if len(a.args) != (2 if a.command == "check-one" else 0):
        p.error("check-one takes MODEL TARGET, the other commands no positional arguments")
    if a.command == "list":
        manifest = read_manifest(a.cache, missing_ok=True)
        for name in MODELS:
            print(f"{name:30} {manifest[name]['family'] if name in manifest else '(not exported)'}")
        return 0
    if a.command == "export":
        return export(_names(a.models, MODELS), a.cache)
    sys.path.insert(0, ROOT)  # the lightnet next to this bench/
    if a.command == "check-one":
        name, target = a.args
        print(json.dumps(check_one(a.cache, read_manifest(a.cache)[name], target)))
        return 0
    try:
        manifest = read_manifest(a.cache)
    except FileNotFoundError as e:
        sys.exit(f"zoo.py: {e}")
    targets = [t.strip() for t in a.target.split(",") if t.strip()]
    return check(_names(a.models, list(manifest)), a.cache, targets)


if __name__ == "__main__":
    sys.exit(main())
