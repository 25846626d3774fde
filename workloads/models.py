"""A decoder-only Transformer language model of the GPT-2 family sizes, annotated with NVTX ranges.

Token embedding, rotary position embeddings (RoPE), pre-norm RMSNorm, causal multi-head
self-attention, SwiGLU feed-forward, untied LM head. No biases. Attention is ``naive`` (explicit
scores matmul, softmax, output matmul: each its own NVTX range) or ``sdpa``
(``torch.nn.functional.scaled_dot_product_attention``: flash / memory-efficient kernels on a GPU).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tracekit.errors import UsageError
from tracekit.run_config import ModelConfig, model_config
from workloads.annotate import nvtx_range

ROPE_THETA = 10_000.0
ATTENTION_KINDS = ("naive", "sdpa")


def parameter_count(config: ModelConfig) -> int:
    """Trainable parameters in closed form: embedding + LM head (2 V d), per layer 4 d^2 attention
    projections + 3 d d_ff SwiGLU + 2 d norm weights, and the final norm's d."""
    d, layers = config.d_model, config.num_layers
    return 2 * config.vocab_size * d + layers * (4 * d * d + 3 * d * config.d_ff + 2 * d) + d


def flops_per_step(config: ModelConfig, batch: int, context: int, backward: bool, causal: bool = False) -> int:
    """Model FLOPs of one step: 2 per multiply-add of every matmul (projections, SwiGLU, LM head, and
    the attention scores and weighted sum), times 3 with a backward pass (the backward pass costs about
    twice the forward). Excludes the optimizer and elementwise work. Attention is counted over the full
    context x context square, as naive attention computes it; ``causal`` counts only the query-key
    pairs the causal mask keeps (context (context + 1) / 2), the work the result needs."""
    d, layers, tokens = config.d_model, config.num_layers, batch * context
    matmul_params = layers * (4 * d * d + 3 * d * config.d_ff) + d * config.vocab_size
    pairs = context * (context + 1) // 2 if causal else context * context
    attention = layers * 2 * 2 * batch * pairs * d
    forward = 2 * matmul_params * tokens + attention
    return forward * (3 if backward else 1)


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalize in float32 for stability under autocast, return in the input's dtype.
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x * self.weight).to(dtype)


class RotaryEmbedding(nn.Module):
    """Rotates pairs of query/key channels by position-dependent angles (no parameters)."""

    # Buffers registered in __init__; declared so that a checker knows they are tensors, not modules.
    cos: torch.Tensor
    sin: torch.Tensor

    def __init__(self, head_dim: int, context_length: int, theta: float = ROPE_THETA):
        super().__init__()
        inverse = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(context_length, dtype=torch.float32), inverse)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-2]
        cos, sin = self.cos[:length].to(x.dtype), self.sin[:length].to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig, attention: str):
        super().__init__()
        if attention not in ATTENTION_KINDS:
            raise UsageError(f"unknown attention {attention!r}; choose naive or sdpa")
        self.num_heads, self.head_dim, self.attention = config.num_heads, config.head_dim, attention
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.output = nn.Linear(config.d_model, config.d_model, bias=False)
        self.rope = RotaryEmbedding(config.head_dim, config.context_length)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q), self.rope(k)
        with nvtx_range("attention"):
            if self.attention == "sdpa":
                mixed = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                mixed = naive_attention(q, k, v)
        return self.output(mixed.transpose(1, 2).reshape(batch, length, -1))


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + causal mask) v, one NVTX range per step."""
    length = q.shape[-2]
    with nvtx_range("attention scores"):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        mask = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    with nvtx_range("softmax"):
        weights = torch.softmax(scores, dim=-1)
    with nvtx_range("attention output"):
        return weights @ v


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, config: ModelConfig, attention: str):
        super().__init__()
        self.attention_norm = RMSNorm(config.d_model)
        self.attention = CausalSelfAttention(config, attention)
        self.ffn_norm = RMSNorm(config.d_model)
        self.ffn = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class TransformerLM(nn.Module):
    def __init__(self, config: ModelConfig, attention: str = "naive"):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(Block(config, attention) for _ in range(config.num_layers))
        self.final_norm = RMSNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, length, vocab) for token ids (batch, length)."""
        x = self.embedding(tokens)
        for index, layer in enumerate(self.layers):
            with nvtx_range(f"layer.{index}"):
                x = layer(x)
        return self.lm_head(self.final_norm(x))


def build_model(
    name: str, context_length: int, attention: str = "naive", device: str | torch.device = "cpu", seed: int = 0
) -> TransformerLM:
    """A freshly initialized model of the named size on ``device`` (float32 weights)."""
    torch.manual_seed(seed)
    return TransformerLM(model_config(name, context_length), attention).to(device)
