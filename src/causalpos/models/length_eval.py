"""Length generalisation of a trained decoder: its held-out loss on sequences of 1x, 2x, 4x its training length
(Kazemnejad et al., 2023: train at one length, test at longer ones)."""

from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from causalpos.catalogue.tables import LENGTH_EVAL_COLUMNS
from causalpos.io import read_json
from causalpos.models.blocks import Blocks, to_tokens, token_losses
from causalpos.models.model_files import checked_again_on_failure, verify_model_folder
from causalpos.models.progress import Progress
from causalpos.runtime.devices import resolve_device


@torch.no_grad()
def evaluate_lengths(
    model_dir,
    blocks_dir,
    factors=(1, 2, 4),
    max_sequences: int = 64,
    batch_size: int = 8,
    device: str = "auto",
    threads: int | None = None,
    model_name: str | None = None,
    beyond_context: bool = False,
) -> pd.DataFrame:
    """Held-out loss of a trained model on sequences of factor x block_len tokens.

    Factor k joins k consecutive held-out blocks into one sequence (Kazemnejad et
    al., 2023: train at one length, test at longer ones). All factors read the
    same tokens, the first max_sequences x max(factors) blocks (fewer if the
    held-out split is shorter), so they differ only in how much context precedes
    each token. Sequences longer than the model's max_position_embeddings raise
    ValueError (set training.model.context >= max(factors) x block_len), unless
    `beyond_context`: the forward pass itself runs at any length (SmolLM3's
    default RoPE computes the rotation of any position; NoPE has none).

    Columns: model, factor, seq_len, n_sequences, heldout_loss (mean over all
    predicted tokens) and heldout_loss_sem (standard error over sequences).
    """
    from transformers import AutoModelForCausalLM

    model_dir = Path(model_dir)
    blocks = Blocks(blocks_dir)
    factors = sorted({int(f) for f in factors})
    if not factors or factors[0] < 1:
        raise ValueError(f"factors = {factors} must be positive integers")
    if threads:
        torch.set_num_threads(threads)
    dev = resolve_device(device, "training.device")
    verify_model_folder(model_dir)  # a damaged file: DamagedFileError naming it, not safetensors' error
    with checked_again_on_failure(model_dir):
        model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").to(dev).eval()
    limit = model.config.max_position_embeddings
    longest = factors[-1] * blocks.block_len
    if longest > limit and not beyond_context:
        raise ValueError(
            f"factor {factors[-1]} needs sequences of {longest} tokens, beyond max_position_embeddings "
            f"= {limit} of {model_dir} (training.model.context)"
        )
    n_blocks = min(max_sequences * factors[-1], len(blocks.heldout) // factors[-1] * factors[-1])
    if n_blocks == 0:
        raise ValueError(f"{blocks.dir}: {len(blocks.heldout)} held-out blocks, fewer than factor {factors[-1]}")
    name = model_name or _trained_name(model_dir)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else nullcontext()
    rows = []
    # every factor puts the same n_blocks held-out blocks through: log every 5% of the tokens (issue 42)
    progress = Progress(len(factors) * n_blocks * blocks.block_len, 0, f"length eval {name}", unit="tokens")
    for factor in factors:
        sequences = np.asarray(blocks.heldout[:n_blocks]).reshape(n_blocks // factor, factor * blocks.block_len)
        per_sequence = []
        for start in range(0, len(sequences), batch_size):
            batch = sequences[start : start + batch_size]
            with autocast:
                losses = token_losses(model, to_tokens(batch, dev))
            per_sequence.append(losses.double().mean(dim=1).cpu())
            progress.update(batch.size)
        per_sequence = torch.cat(per_sequence).numpy()
        sem = per_sequence.std(ddof=1) / math.sqrt(len(per_sequence)) if len(per_sequence) > 1 else math.nan
        rows.append(
            {
                "model": name,
                "factor": factor,
                "seq_len": factor * blocks.block_len,
                "n_sequences": len(per_sequence),
                "heldout_loss": float(per_sequence.mean()),
                "heldout_loss_sem": float(sem),
            }
        )
    progress.close()
    return pd.DataFrame(rows, columns=LENGTH_EVAL_COLUMNS)


def _trained_name(model_dir: Path) -> str:
    info = model_dir / "training.json"
    if info.is_file():
        return read_json(info).get("model_name", model_dir.name)
    return model_dir.name
