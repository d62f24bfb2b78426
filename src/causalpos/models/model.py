"""The two decoders of Section 4.2: Llama-3 architecture with and without RoPE.

Both are transformers' own SmolLM3ForCausalLM (a Llama-3 decoder whose
`no_rope_layers` switches RoPE per layer: 1 = RoPE, 0 = NoPE), so `nope` is
the exact same network as `rope` minus the rotation of queries and keys: same
parameter names and shapes, and with the same seed the same initial weights.
"""

from __future__ import annotations

import torch
from transformers import SmolLM3Config, SmolLM3ForCausalLM

from causalpos.models.settings import model_settings


def model_config(model_cfg: dict, vocab_size: int, rope: bool, eos_token_id: int | None = None) -> SmolLM3Config:
    cfg = model_settings(model_cfg)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size = {vocab_size!r} must be an integer >= 2")
    if eos_token_id is not None and not 0 <= eos_token_id < vocab_size:
        raise ValueError(f"eos_token_id = {eos_token_id} is outside the vocabulary of {vocab_size}")
    n = cfg["n_layers"]
    return SmolLM3Config(
        vocab_size=vocab_size,
        hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"],
        num_hidden_layers=n,
        num_attention_heads=cfg["n_heads"],
        num_key_value_heads=cfg["n_kv_heads"],
        head_dim=cfg["head_dim"],
        max_position_embeddings=cfg["context"],
        rope_parameters={"rope_type": "default", "rope_theta": float(cfg["rope_theta"])},
        no_rope_layers=[int(rope)] * n,  # 1 = RoPE in that layer, 0 = NoPE
        use_sliding_window=False,
        tie_word_embeddings=cfg["tie_word_embeddings"],
        # SmolLM3's defaults are ids of its 128k vocabulary; a padding_idx would
        # also zero an embedding row at init, so there is none (blocks have no padding).
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=eos_token_id,
        use_cache=False,
    )


def build_model(model_cfg: dict, vocab_size: int, rope: bool, eos_token_id: int | None = None) -> SmolLM3ForCausalLM:
    """A freshly initialised decoder from torch's global RNG (seed it first).

    `model_cfg`: a complete `training.model` (causalpos.models.settings.ModelSettings; the config schema
    holds the defaults): n_layers, hidden_size, n_heads, n_kv_heads, head_dim (= hidden_size / n_heads),
    intermediate_size, context (max_position_embeddings), rope_theta, tie_word_embeddings.
    `rope` False gives the NoPE model: no layer rotates queries and keys.
    """
    config = model_config(model_cfg, vocab_size, rope, eos_token_id)
    model = SmolLM3ForCausalLM._from_config(config, attn_implementation="sdpa", dtype=torch.float32)
    return model


def count_parameters(model: torch.nn.Module) -> dict:
    """Total parameters and those outside the (input) embedding table, tied weights counted once."""
    total = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight.numel()
    return {"total": total, "non_embedding": total - embedding}
