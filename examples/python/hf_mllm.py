"""A multimodal model built from Hugging Face transformers modules, trained
disaggregated with disttrain: a ViT encoder (transformers.ViTModel, the
class token of each image projected to the backbone's width) -> a Llama
decoder (transformers' LlamaDecoderLayer with rotary positions, causal, split
into pipeline stages; stage 0 embeds the text after the image rows, the last
stage applies the final RMSNorm) -> a generator head regressing a target per
position. Every module is randomly initialised from a small config (no
weights are downloaded) and tiny enough for CPU; each sample has 1-3 images
and 3-9 text tokens. The trainer is examples/python/torch_mllm.py's (same
flags, same --check: every parameter's gradient against a single-process run
of this model on the same batch, float64, limit 1e-12; --bf16: bfloat16,
limit 5e-2), with this file's model.

  torchrun --nproc-per-node 7 examples/python/hf_mllm.py --enc-dp 2 --bb-pp 2 --bb-dp 1 \\
      --gen-dp 3 --check

The layout flags (--enc-dp --bb-pp --bb-dp --gen-dp, --enc-tp --bb-tp
--gen-tp, --virtual-stages, --zero-bubble, --fifo) are torch_mllm.py's; all
four degrees must be given (no planner scenario is written for this model).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch
from torch import nn
from transformers import LlamaConfig, ViTConfig, ViTModel
from transformers.models.llama.modeling_llama import (LlamaDecoderLayer, LlamaRMSNorm,
                                                      LlamaRotaryEmbedding)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_mllm  # noqa: E402  (the trainer)

IMAGE, PATCH, CHANNELS, VIT_DIM = 8, 4, 3, 16
LAYERS, VOCAB, SEED = 4, 32, 4321
DIM, OUT_DIM = torch_mllm.DIM, torch_mllm.OUT_DIM  # torch_mllm.Generator's widths

VIT = ViTConfig(image_size=IMAGE, patch_size=PATCH, num_channels=CHANNELS, hidden_size=VIT_DIM,
                num_hidden_layers=1, num_attention_heads=2, intermediate_size=2 * VIT_DIM,
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
LLAMA = LlamaConfig(hidden_size=DIM, intermediate_size=2 * DIM, num_hidden_layers=LAYERS,
                    num_attention_heads=2, num_key_value_heads=2, vocab_size=VOCAB,
                    max_position_embeddings=64)
LLAMA._attn_implementation = "sdpa"  # causal without a mask (LlamaAttention.is_causal)


# ---- data: one deterministic sample per id ------------------------------------

def sample(i: int, dtype: torch.dtype) -> dict:
    """1-3 images (CHANNELS x IMAGE x IMAGE), 3..9 text tokens, a target per position."""
    g = np.random.default_rng(SEED + i)
    images = torch.as_tensor(g.standard_normal((int(g.integers(1, 4)), CHANNELS, IMAGE, IMAGE)),
                             dtype=dtype)
    text = torch.as_tensor(g.integers(0, VOCAB, int(g.integers(3, 10))))
    seq = len(images) + len(text)
    return {"images": images, "text": text,
            "target": torch.as_tensor(g.standard_normal((seq, OUT_DIM)), dtype=dtype)}


def sample_costs(s: dict) -> tuple[float, float, float]:
    """The reorderer's costs: encoder ~ images, backbone ~ tokens^2, generator ~ tokens."""
    seq = len(s["images"]) + len(s["text"])
    return (len(s["images"]), seq * (1 + 0.1 * seq), 1.0 + 0.1 * seq)


def costs(ids: np.ndarray) -> np.ndarray:
    return torch_mllm.costs_by(ids, sys.modules[__name__])


# ---- the model ------------------------------------------------------------------

class Encoder(nn.Module):
    """transformers' ViT; each image's class token, projected: one row per image."""

    def __init__(self) -> None:
        super().__init__()
        self.vit = ViTModel(VIT, add_pooling_layer=False)
        self.proj = nn.Linear(VIT_DIM, DIM)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(self.vit(pixel_values=images).last_hidden_state[:, 0])


class BackboneStage(nn.Module):
    """Llama decoder layers [first, last) over one sample's rows (positions
    0..rows-1, causal); stage 0 embeds the text after the image rows, the
    stage holding the last layer applies the final norm."""

    def __init__(self, first: int, last: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM) if first == 0 else None
        self.layers = nn.ModuleList(LlamaDecoderLayer(LLAMA, k) for k in range(first, last))
        self.rotary = LlamaRotaryEmbedding(LLAMA)
        self.norm = LlamaRMSNorm(DIM, eps=LLAMA.rms_norm_eps) if last == LAYERS else None

    def forward(self, h: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            h = torch.cat([h, self.embed(text)])
        x = h[None]
        pos = torch.arange(len(h))[None]
        rope = self.rotary(x, pos)
        for layer in self.layers:
            x = layer(x, position_ids=pos, position_embeddings=rope)
            x = x[0] if isinstance(x, tuple) else x  # transformers 4.x returns a tuple
        return (self.norm(x) if self.norm is not None else x)[0]


class Model(torch_mllm.Pipeline):
    """This file's model (torch_mllm's generator head)."""
    encoder_class, stage_class, generator_class, seed = (Encoder, BackboneStage,
                                                         torch_mllm.Generator, SEED)

    def __init__(self, stages: list[tuple[int, int]], dtype: torch.dtype) -> None:
        if stages[-1][1] != LAYERS:
            sys.exit(f"hf_mllm has {LAYERS} backbone layers; the layout asks for "
                     f"{stages[-1][1]} (fewer virtual stages)")
        super().__init__(stages, dtype)


if __name__ == "__main__":
    sys.exit(torch_mllm.main(sys.modules[__name__]))
