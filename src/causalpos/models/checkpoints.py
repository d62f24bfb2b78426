"""Checkpoints of a training run: one file with a SHA-256 header, written atomically, and what must match to
resume from it (the run's fingerprint), with the RNG states that make the resumed run bitwise the same."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
from pathlib import Path

import numpy as np
import torch

from causalpos.errors import UserError
from causalpos.io import atomic_path

# Settings that do not change the weights a run ends with: a run may resume
# from a checkpoint written under different values of these.
RESUMABLE_CHANGES = ("eval_every", "eval_batches", "checkpoint_every", "log_every", "device", "threads")
CHECKPOINT_NAME = "last.ckpt"
CHECKPOINT_MAGIC = b"causalpos checkpoint v1 sha256 "


class CheckpointError(UserError, RuntimeError):
    """A checkpoint file is damaged or belongs to a different run; the message names the file."""


def rng_states() -> dict:
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    # plain types and tensors only, so the checkpoint loads with weights_only=True
    states = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    random.setstate(_as_tuples(states["python"]))
    kind, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _as_tuples(value):
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def save_checkpoint(payload: dict, path) -> None:
    """Write `payload` atomically, prefixed by the SHA-256 of its bytes.

    One file holds both, so a kill at any moment leaves either the old or the new
    checkpoint, never a payload with a stale digest.
    """
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    data = buffer.getvalue()
    header = CHECKPOINT_MAGIC + hashlib.sha256(data).hexdigest().encode() + b"\n"
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(header)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # the rename must not land before the data


def load_checkpoint(path) -> dict:
    """The payload of a checkpoint; CheckpointError naming the file if it is damaged."""
    raw = Path(path).read_bytes()
    head, sep, data = raw.partition(b"\n")
    if not sep or not head.startswith(CHECKPOINT_MAGIC):
        raise CheckpointError(
            f"checkpoint {path} is damaged: no causalpos checkpoint header (delete it to train from the start)"
        )
    expected = head[len(CHECKPOINT_MAGIC) :].decode(errors="replace")
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise CheckpointError(
            f"checkpoint {path} is damaged: SHA-256 of its {len(data)} payload bytes is "
            f"{actual}, its header says {expected} (delete it to train from the start)"
        )
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def fingerprint(model_name: str, rope: bool, cfg: dict, blocks, world: int) -> dict:
    """What a checkpoint must share with the run that resumes from it."""
    kept = {k: v for k, v in cfg.items() if k not in RESUMABLE_CHANGES}
    return json.loads(
        json.dumps(
            {
                "model_name": model_name,
                "rope": bool(rope),
                "training": kept,
                "global_batch": cfg["micro_batch"] * cfg["grad_accum"] * world,
                "block_len": blocks.block_len,
                "vocab_size": blocks.vocab_size,
                "n_train_blocks": len(blocks.train),
            }
        )
    )


def check_fingerprint(saved: dict, current: dict, path) -> None:
    if saved != current:
        keys = sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k))
        detail = "; ".join(f"{k}: checkpoint {saved.get(k)!r}, now {current.get(k)!r}" for k in keys)
        raise CheckpointError(
            f"checkpoint {path} was written by a different run ({detail}); delete it to train from the start"
        )


def remove_stale_temporaries(checkpoint_dir: Path) -> None:
    # atomic_path's temporaries survive a SIGKILL during a save; they are never read
    stem, suffix = Path(CHECKPOINT_NAME).stem, Path(CHECKPOINT_NAME).suffix
    for tmp in checkpoint_dir.glob(f".{stem}.*.tmp{suffix}"):
        tmp.unlink(missing_ok=True)
