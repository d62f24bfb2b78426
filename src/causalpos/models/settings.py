"""Settings of the training stage: defaults and checks, in plain Python.

The workflow checks the `training` section with these before any job runs
(no torch import at DAG time); `causalpos.models.model` and `causalpos.models.train` use the
same functions, so a bad value is named the same way everywhere.
"""

from __future__ import annotations

import math

# The default model: ~5.0M parameters (2.9M outside the tied embedding), sized so
# that each of nope and rope trains in ~9 minutes on a 2-core CPU (bench/README.md).
# context = 4 x the default block length of 256, so that the length-generalisation
# evaluation at 4x stays within max_position_embeddings.
DEFAULT_MODEL = {
    "n_layers": 4,
    "hidden_size": 256,
    "n_heads": 4,
    "n_kv_heads": 2,
    "head_dim": 64,
    "intermediate_size": 688,
    "context": 1024,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
}

PREFIX = "training.model"  # where these settings live in config.yaml, for error messages


def _positive_int(cfg: dict, key: str) -> int:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{PREFIX}.{key} = {value!r} must be a positive integer")
    return value


def model_settings(model_cfg: dict) -> dict:
    """`model_cfg` over DEFAULT_MODEL, checked; ValueError names the offending setting."""
    unknown = sorted(set(model_cfg) - set(DEFAULT_MODEL))
    if unknown:
        raise ValueError(f"unknown setting {PREFIX}.{unknown[0]} (known: {', '.join(DEFAULT_MODEL)})")
    cfg = {**DEFAULT_MODEL, **model_cfg}
    for key in ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "intermediate_size", "context"):
        _positive_int(cfg, key)
    if cfg["hidden_size"] % cfg["n_heads"]:
        raise ValueError(f"{PREFIX}.n_heads = {cfg['n_heads']} does not divide "
                         f"{PREFIX}.hidden_size = {cfg['hidden_size']}")
    if cfg["n_heads"] % cfg["n_kv_heads"]:
        raise ValueError(f"{PREFIX}.n_kv_heads = {cfg['n_kv_heads']} does not divide "
                         f"{PREFIX}.n_heads = {cfg['n_heads']}")
    if cfg["head_dim"] != cfg["hidden_size"] // cfg["n_heads"]:
        raise ValueError(f"{PREFIX}.head_dim = {cfg['head_dim']} must equal {PREFIX}.hidden_size / "
                         f"{PREFIX}.n_heads = {cfg['hidden_size'] // cfg['n_heads']}")
    if cfg["head_dim"] % 2:  # RoPE rotates pairs of coordinates
        raise ValueError(f"{PREFIX}.head_dim = {cfg['head_dim']} must be even")
    theta = cfg["rope_theta"]
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 1:
        raise ValueError(f"{PREFIX}.rope_theta = {theta!r} must be a number > 1")
    if not isinstance(cfg["tie_word_embeddings"], bool):
        raise ValueError(f"{PREFIX}.tie_word_embeddings = {cfg['tie_word_embeddings']!r} must be true or false")
    return cfg


# Training settings (the `training` section of the config, minus `model`).
# Sized for the default model on a 2-core CPU: 1,600 steps x 4 sequences x 256
# tokens = 1.6M tokens, ~9 minutes per model at ~3,200 tokens/s. On 1.2M tokens
# of English news (BPE 8192) small batches learned faster per token than large
# ones at the same throughput (bench/README.md).
DEFAULT_TRAIN = {
    "steps": 1600,           # optimizer steps
    "micro_batch": 4,        # sequences (blocks) per forward/backward, per rank
    "grad_accum": 1,         # micro batches per optimizer step; global batch = micro_batch x grad_accum x world
    "lr": 1e-3,              # peak learning rate, reached at the end of warmup
    "min_lr": 1e-4,          # the cosine schedule ends here at `steps`
    "warmup_steps": 100,     # linear warmup from lr / (warmup_steps + 1) to lr
    "weight_decay": 0.1,     # AdamW, on matrices and embeddings only (not norms)
    "betas": [0.9, 0.95],
    "grad_clip": 1.0,        # max global gradient norm; 0 disables clipping
    "seed": 0,               # torch, numpy and python RNGs, model init and data order
    "eval_every": 200,       # held-out loss every this many steps (and at 0 and the end); 0 = never
    "eval_batches": 16,      # micro batches of held-out blocks per evaluation (the same blocks each time)
    "checkpoint_every": 200,  # steps between checkpoints (and one at the end); 0 = only at the end
    "log_every": 20,         # steps per metrics row / log line
    "device": "auto",        # auto | cpu | cuda
    "threads": 0,            # CPU threads per rank; 0 = the CPUs the job may use / ranks on this node
    "snapshot_steps": 8,     # weight-only snapshots: a count (0 and the last step, the rest log-spaced) or a list
}


def training_settings(cfg: dict) -> dict:
    """`cfg` (the training section, with an optional `model` dict) over the defaults, checked."""
    cfg = dict(cfg)
    model = model_settings(cfg.pop("model", None) or {})
    unknown = sorted(set(cfg) - set(DEFAULT_TRAIN))
    if unknown:
        raise ValueError(f"unknown setting training.{unknown[0]} (known: model, {', '.join(DEFAULT_TRAIN)})")
    cfg = {**DEFAULT_TRAIN, **cfg}
    for key in ("steps", "micro_batch", "grad_accum"):
        if not _is_int(cfg[key]) or cfg[key] < 1:
            raise ValueError(f"training.{key} = {cfg[key]!r} must be a positive integer")
    for key in ("warmup_steps", "eval_every", "eval_batches", "checkpoint_every", "log_every", "seed", "threads"):
        if not _is_int(cfg[key]) or cfg[key] < 0:
            raise ValueError(f"training.{key} = {cfg[key]!r} must be a non-negative integer")
    if cfg["log_every"] < 1:
        raise ValueError(f"training.log_every = {cfg['log_every']} must be at least 1")
    if not (_is_number(cfg["lr"]) and cfg["lr"] > 0):
        raise ValueError(f"training.lr = {cfg['lr']!r} must be a positive number")
    if not (_is_number(cfg["min_lr"]) and 0 <= cfg["min_lr"] <= cfg["lr"]):
        raise ValueError(f"training.min_lr = {cfg['min_lr']!r} must be between 0 and training.lr = {cfg['lr']}")
    for key in ("weight_decay", "grad_clip"):
        if not (_is_number(cfg[key]) and cfg[key] >= 0):
            raise ValueError(f"training.{key} = {cfg[key]!r} must be a non-negative number")
    betas = cfg["betas"]
    if not (isinstance(betas, (list, tuple)) and len(betas) == 2 and all(_is_number(b) and 0 <= b < 1 for b in betas)):
        raise ValueError(f"training.betas = {betas!r} must be two numbers in [0, 1)")
    if cfg["device"] not in ("auto", "cpu", "cuda"):
        raise ValueError(f"training.device = {cfg['device']!r} must be auto, cpu or cuda")
    cfg["betas"] = [float(b) for b in betas]
    snapshot_schedule(cfg)  # checks training.snapshot_steps
    cfg["model"] = model
    return cfg


def snapshot_schedule(cfg: dict) -> list[int]:
    """The optimizer steps after which training writes a weight-only snapshot, sorted (step 0: before any update).

    `snapshot_steps` n (an integer): none for 0, else n steps: 0, the last, and n - 2 between them log-spaced,
    round(steps^(k / (n - 1))) for k = 1 .. n - 2 (fewer where two round to the same step); a list: those
    steps, with 0 and the last added. Plain Python: the workflow reads it to declare rule train's outputs."""
    value, steps = cfg.get("snapshot_steps", DEFAULT_TRAIN["snapshot_steps"]), cfg["steps"]
    if _is_int(value):
        if value < 0 or value == 1:
            raise ValueError(f"training.snapshot_steps = {value} must be 0 (no snapshots), at least 2 (step 0, the "
                             f"last and log-spaced steps between), or a list of steps")
        if value == 0:
            return []
        chosen = {0, steps} | {round(steps ** (k / (value - 1))) for k in range(1, value - 1)}
    elif isinstance(value, (list, tuple)) and all(_is_int(s) for s in value):
        outside = [s for s in value if not 0 <= s <= steps]
        if outside:
            raise ValueError(f"training.snapshot_steps: {outside} outside 0 .. training.steps = {steps}")
        chosen = {0, steps, *value}
    else:
        raise ValueError(f"training.snapshot_steps = {value!r} must be a non-negative integer or a list of steps")
    return sorted(chosen)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
