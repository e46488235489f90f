"""Tiny, randomly initialised models of the Hugging Face ``transformers`` library and of ``timm``
(no weights are downloaded: HF models come from small configs, timm's with ``pretrained=False``),
and the inputs to run each on. HF models are wrapped to take tensors and return one tensor;
timm's already do."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: Small transformer sizes shared by the HF configs.
H, LAYERS, HEADS, FFN, VOCAB, SEQ = 32, 2, 4, 64, 99, 8


def _wrap(model: Any, keys: tuple[str, ...] = ("input_ids", "attention_mask")) -> Any:
    import torch

    class Wrapped(torch.nn.Module):
        """Tensors in (passed as ``keys``: HF models' positional order differs between them),
        the model's first output out."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *xs: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(keys, xs)))[0]

    return Wrapped().eval()


def _ids(n: int = SEQ) -> Any:
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randint(1, VOCAB, (1, n), generator=g)


def _image(size: int, channels: int = 3) -> Any:
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randn(1, channels, size, size, generator=g)


def _text_common() -> dict[str, Any]:
    return dict(hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                intermediate_size=FFN, vocab_size=VOCAB, max_position_embeddings=64)


def import_zoo(name: str) -> Any:
    """``transformers`` or ``timm``, after torchvision (both import it; see import_torchvision)."""
    import importlib

    from tests.torchscript._torchvision import HAVE_TORCHVISION, import_torchvision

    if HAVE_TORCHVISION:  # without it, the models that do not need it still import
        import_torchvision()
    return importlib.import_module(name)


def importorskip_zoo(name: str) -> Any:
    """``import_zoo(name)``, or skip the module's tests saying why (pytest.importorskip)."""
    import pytest

    try:
        return import_zoo(name)
    except ImportError:
        return pytest.importorskip(name, reason=f"{name} is not installed (make install adds it "
                                                "where the torch wheel is)")


def _hf(name: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    tf = import_zoo("transformers")

    torch.manual_seed(0)
    mask = torch.ones(1, SEQ, dtype=torch.long)
    mask[0, -2:] = 0
    if name == "bert":
        return _wrap(tf.BertModel(tf.BertConfig(**_text_common()))), (_ids(), mask)
    if name == "roberta":
        m = tf.RobertaModel(tf.RobertaConfig(**_text_common(), pad_token_id=1))
        return _wrap(m), (_ids(), mask)
    if name == "distilbert":
        cfg = tf.DistilBertConfig(dim=H, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
                                  vocab_size=VOCAB, max_position_embeddings=64)
        return _wrap(tf.DistilBertModel(cfg)), (_ids(), mask)
    if name == "gpt2":
        cfg = tf.GPT2Config(n_embd=H, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB,
                            n_positions=64, use_cache=False)
        return _wrap(tf.GPT2LMHeadModel(cfg)), (_ids(), mask)
    if name in ("llama", "qwen2"):
        kw = dict(_text_common(), num_key_value_heads=2, use_cache=False)
        cfg = tf.LlamaConfig(**kw) if name == "llama" else tf.Qwen2Config(**kw)
        cls = tf.LlamaForCausalLM if name == "llama" else tf.Qwen2ForCausalLM
        return _wrap(cls(cfg)), (_ids(), mask)
    if name == "t5_encoder":
        cfg = tf.T5Config(d_model=H, d_ff=FFN, num_layers=LAYERS, num_heads=HEADS, d_kv=H // HEADS,
                          vocab_size=VOCAB)
        return _wrap(tf.T5EncoderModel(cfg)), (_ids(), mask)
    if name == "t5_seq2seq":
        cfg = tf.T5Config(d_model=H, d_ff=FFN, num_layers=LAYERS, num_heads=HEADS, d_kv=H // HEADS,
                          vocab_size=VOCAB, decoder_start_token_id=0, use_cache=False)
        keys = ("input_ids", "attention_mask", "decoder_input_ids")
        return _wrap(tf.T5ForConditionalGeneration(cfg), keys=keys), (_ids(), mask, _ids(4))
    if name == "vit":
        cfg = tf.ViTConfig(**{k: v for k, v in _text_common().items()
                              if k not in ("vocab_size", "max_position_embeddings")},
                           image_size=32, patch_size=8)
        return _wrap(tf.ViTModel(cfg), keys=("pixel_values",)), (_image(32),)
    if name == "whisper_encoder":
        cfg = tf.WhisperConfig(d_model=H, encoder_layers=LAYERS, encoder_attention_heads=HEADS,
                               encoder_ffn_dim=FFN, decoder_layers=1, decoder_attention_heads=HEADS,
                               decoder_ffn_dim=FFN, num_mel_bins=16, max_source_positions=8,
                               vocab_size=VOCAB, pad_token_id=0, bos_token_id=1,
                               eos_token_id=2, decoder_start_token_id=1)
        enc = tf.WhisperModel(cfg).get_encoder()
        g = torch.Generator().manual_seed(0)
        return _wrap(enc, keys=("input_features",)), (torch.randn(1, 16, 16, generator=g),)
    if name == "clip_vision":
        cfg = tf.CLIPVisionConfig(hidden_size=H, intermediate_size=FFN, num_hidden_layers=LAYERS,
                                  num_attention_heads=HEADS, image_size=32, patch_size=8)
        return _wrap(tf.CLIPVisionModel(cfg), keys=("pixel_values",)), (_image(32),)
    if name == "clip_text":
        cfg = tf.CLIPTextConfig(**_text_common())
        return _wrap(tf.CLIPTextModel(cfg)), (_ids(),)
    raise KeyError(name)


HF_MODELS = ("bert", "roberta", "distilbert", "gpt2", "llama", "qwen2", "t5_encoder", "t5_seq2seq",
             "vit", "whisper_encoder", "clip_vision", "clip_text")

#: timm model name -> (image size, extra create_model keywords).
TIMM_MODELS: dict[str, tuple[int, dict[str, Any]]] = {
    "efficientnet_b0": (64, {}),
    "convnext_atto": (64, {}),
    "mobilevitv2_050": (64, {}),
    "levit_128s": (64, {"img_size": 64}),
    "regnetx_002": (64, {}),
    "resnest14d": (64, {}),
    "deit_tiny_patch16_224": (64, {"img_size": 64}),
    "swin_tiny_patch4_window7_224": (56, {"img_size": 56, "window_size": 7}),
    "maxvit_tiny_tf_224": (64, {"img_size": 64}),
    "mobilenetv4_conv_small": (64, {}),
}


def _timm(name: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    timm = import_zoo("timm")

    torch.manual_seed(0)
    size, kw = TIMM_MODELS[name]
    model = timm.create_model(name, pretrained=False, num_classes=10, **kw).eval()
    return model, (_image(size),)  # one tensor in, one out: no wrapper needed


def build(name: str) -> tuple[Any, tuple[Any, ...]]:
    """(module, inputs) of the zoo model ``name``: an HF architecture or a timm model name."""
    return _timm(name) if name in TIMM_MODELS else _hf(name)


def reference(model: Any, inputs: tuple[Any, ...]) -> Any:
    import torch

    with torch.no_grad():
        return model(*inputs).numpy()


def check_torchscript(name: str, simulate: bool = False) -> None:
    """Export ``name`` to TorchScript-json, convert, interpret and compare with torch (the
    shared check of tests/torchscript); with ``simulate``, also compile for the bm1684
    simulator, run and compare."""
    import numpy as np

    import opbridge as ob
    from tests.torchscript.helpers import assert_close, check

    model, inputs = build(name)
    graph = check(model, *inputs)
    if simulate:
        feeds = {v.name: t.numpy() for v, t in zip(graph.inputs, inputs)}
        sim = ob.compile(graph, "bm1684").run(feeds)[graph.outputs[0].name]
        assert_close(np.asarray(sim), reference(model, inputs), what=f"{name} simulator vs torch")


def check_onnx(name: str, path: Any) -> float:
    """torch.onnx.export ``name`` (the TorchScript-based exporter, opset 17) to ``path``,
    convert, interpret; compare with onnxruntime and torch. Returns the max relative error."""
    import warnings

    import numpy as np
    import onnxruntime as ort
    import torch

    import opbridge as ob
    from tests.torchscript.helpers import assert_close

    model, inputs = build(name)
    in_names = [f"x{i}" for i in range(len(inputs))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, str(path), dynamo=False, opset_version=17,
                          input_names=in_names, output_names=["y"])
    feeds = {n: t.numpy() for n, t in zip(in_names, inputs)}
    got = np.asarray(ob.interpret(ob.convert(str(path)), feeds)["y"])
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["y"], feeds)[0]
    err = assert_close(got, reference(model, inputs), what=f"{name} vs torch")
    return max(err, assert_close(got, want, what=f"{name} vs onnxruntime"))
