"""Settings of the training stage: their types and the checks that span several keys, in plain Python.

Every default lives in the config schema (src/causalpos/schemas/config.schema.yaml, `training`): validating a
config fills them in (causalpos.workflow.config.validate_config, and training_defaults there for a section
written outside a config file). This layer reads no schema, so it takes a complete section: a missing key is
an error, never a default of its own. The workflow checks the section with these functions before any job runs
(no torch import at DAG time), and causalpos.models.model and causalpos.models.train check again with the same
ones, so a bad value is named the same way everywhere.
"""

from __future__ import annotations

import math
from typing import TypedDict

PREFIX = "training.model"  # where the model's settings live in config.yaml, for error messages


class ModelSettings(TypedDict):
    """`training.model`: the decoder's shape (causalpos.models.model)."""

    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int  # grouped-query attention: divides n_heads
    head_dim: int  # hidden_size / n_heads, even (RoPE rotates pairs of coordinates)
    intermediate_size: int
    context: int  # max_position_embeddings
    rope_theta: float
    tie_word_embeddings: bool


class TrainingSettings(TypedDict):
    """`training`: how causalpos.models.train trains (docs/configuration.md says what each key means)."""

    steps: int
    micro_batch: int
    grad_accum: int
    lr: float
    min_lr: float
    warmup_steps: int
    weight_decay: float
    betas: list[float]
    grad_clip: float
    seed: int
    eval_every: int
    eval_batches: int
    checkpoint_every: int
    log_every: int
    device: str
    threads: int
    snapshot_steps: int | list[int]
    model: ModelSettings


def _complete(section: dict, keys, prefix: str) -> None:
    """Every key of the TypedDict and no other; the defaults come from the schema, not from here."""
    unknown = sorted(set(section) - set(keys))
    if unknown:
        raise ValueError(f"unknown setting {prefix}.{unknown[0]} (known: {', '.join(keys)})")
    missing = [key for key in keys if key not in section]
    if missing:
        raise ValueError(
            f"{prefix}.{missing[0]} is missing: give every key (causalpos.workflow.config fills in "
            f"the schema's defaults: validate_config, training_defaults)"
        )


def _positive_int(cfg: dict, key: str) -> int:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{PREFIX}.{key} = {value!r} must be a positive integer")
    return value


def model_settings(model_cfg: dict) -> ModelSettings:
    """A complete `training.model`, checked; ValueError names the offending setting."""
    _complete(model_cfg, ModelSettings.__annotations__, PREFIX)
    cfg = {key: model_cfg[key] for key in ModelSettings.__annotations__}
    for key in ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "intermediate_size", "context"):
        _positive_int(cfg, key)
    if cfg["hidden_size"] % cfg["n_heads"]:
        raise ValueError(
            f"{PREFIX}.n_heads = {cfg['n_heads']} does not divide {PREFIX}.hidden_size = {cfg['hidden_size']}"
        )
    if cfg["n_heads"] % cfg["n_kv_heads"]:
        raise ValueError(
            f"{PREFIX}.n_kv_heads = {cfg['n_kv_heads']} does not divide {PREFIX}.n_heads = {cfg['n_heads']}"
        )
    if cfg["head_dim"] != cfg["hidden_size"] // cfg["n_heads"]:
        raise ValueError(
            f"{PREFIX}.head_dim = {cfg['head_dim']} must equal {PREFIX}.hidden_size / "
            f"{PREFIX}.n_heads = {cfg['hidden_size'] // cfg['n_heads']}"
        )
    if cfg["head_dim"] % 2:  # RoPE rotates pairs of coordinates
        raise ValueError(f"{PREFIX}.head_dim = {cfg['head_dim']} must be even")
    theta = cfg["rope_theta"]
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 1:
        raise ValueError(f"{PREFIX}.rope_theta = {theta!r} must be a number > 1")
    if not isinstance(cfg["tie_word_embeddings"], bool):
        raise ValueError(f"{PREFIX}.tie_word_embeddings = {cfg['tie_word_embeddings']!r} must be true or false")
    return cfg


def training_settings(section: dict) -> TrainingSettings:
    """A complete `training` section (with its `model`), checked; a new dict, keys in TrainingSettings' order."""
    _complete(section, TrainingSettings.__annotations__, "training")
    cfg = {key: section[key] for key in TrainingSettings.__annotations__}
    for key in ("steps", "micro_batch", "grad_accum", "threads"):
        if not _is_int(cfg[key]) or cfg[key] < 1:
            raise ValueError(f"training.{key} = {cfg[key]!r} must be a positive integer")
    for key in ("warmup_steps", "eval_every", "eval_batches", "checkpoint_every", "log_every", "seed"):
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
    if not isinstance(cfg["model"], dict):
        raise ValueError(f"training.model = {cfg['model']!r} must be a mapping of the model's settings")
    cfg["model"] = model_settings(cfg["model"])
    return cfg


def check_warmup(cfg: dict) -> None:
    """A config's warmup must end before its last step: causalpos.models.train's schedule (lr_at) rises linearly
    for warmup_steps steps, then falls along a cosine to min_lr at `steps`; with warmup_steps >= steps every step
    is still warming up, the rate never reaches lr and never decays. The workflow checks a config with it (ValueError
    names the keys); training_settings does not, so that a test or a benchmark may train a few steps of a schedule."""
    warmup, steps = cfg["warmup_steps"], cfg["steps"]
    if warmup >= steps:
        raise ValueError(
            f"training.warmup_steps = {warmup} must be less than training.steps = {steps}: the learning "
            f"rate rises during the warmup, so every step would still be warming up (it would never "
            f"reach training.lr = {cfg['lr']} nor decay along the cosine to training.min_lr = "
            f"{cfg['min_lr']}); set it below {steps}"
        )


def snapshot_schedule(cfg: dict) -> list[int]:
    """The optimizer steps after which training writes a weight-only snapshot, sorted (step 0: before any update).

    `snapshot_steps` n (an integer): none for 0, else n steps: 0, the last, and n - 2 between them log-spaced,
    round(steps^(k / (n - 1))) for k = 1 .. n - 2 (fewer where two round to the same step); a list: those
    steps, with 0 and the last added. Plain Python: the workflow reads it to declare rule train's outputs."""
    value, steps = cfg["snapshot_steps"], cfg["steps"]
    if _is_int(value):
        if value < 0 or value == 1:
            raise ValueError(
                f"training.snapshot_steps = {value} must be 0 (no snapshots), at least 2 (step 0, the "
                f"last and log-spaced steps between), or a list of steps"
            )
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
