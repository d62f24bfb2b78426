"""Section 4.2's extraction at every snapshot of a training run, and the held-out loss there (rule emergence).

The paper shows its trained model's Figure 3 only at the end of training; the snapshots
(causalpos.models.snapshots) let the same measurement run at chosen steps along the way. Each snapshot's
weights are loaded into the trained model's architecture and `extract` runs on them exactly as rule extract
runs on the final model (the same snippets, batch size, Figure 3 layer, bootstrap groups and seed; no
position probe), so the last snapshot's tables are the extraction of the final model. The held-out loss at
a step is the training's own evaluation where one happened at that step (metrics.parquet), else the same
evaluation (causalpos.models.train.heldout_loss: the same blocks, batches and autocast) on the snapshot.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from causalpos.catalogue.tables import LOSS_COLUMNS, SNAPSHOT_TABLES
from causalpos.io import read_json

log = logging.getLogger("causalpos")

EMERGENCE_TABLES = SNAPSHOT_TABLES  # the extraction's tables kept per snapshot


@contextmanager
def _quiet_extraction():
    """Without the extraction's progress lines (one line per 5% of every snapshot would drown the log)."""

    def keep(record) -> bool:
        return not str(record.msg).startswith("extract ")

    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)


def tokens_per_step(info: dict) -> int:
    """Training tokens per optimizer step from a model's training.json: global batch x block length."""
    cfg = info["training"]
    return (
        int(cfg["micro_batch"])
        * int(cfg["grad_accum"])
        * int(info.get("world_size", 1))
        * int(info["blocks"]["block_len"])
    )


def emergence_tables(
    model_dir,
    snapshots: dict,
    tokens: np.ndarray,
    blocks_dir,
    metrics: pd.DataFrame,
    name: str,
    device,
    batch_size: int = 8,
    intermediates_layer: int | None = 0,
    n_groups: int = 16,
    seed: int = 0,
) -> tuple[dict, float]:
    """{table: frame} for EMERGENCE_TABLES (the extraction's columns plus step and tokens_seen) and "losses"
    (LOSS_COLUMNS), over `snapshots` {step: file}; and the seconds it took. `device` a torch.device."""
    from transformers import AutoModelForCausalLM

    from causalpos.models.extract import ATTENTION_NAME, extract
    from causalpos.models.model_files import checked_again_on_failure, verify_safetensors
    from causalpos.models.pretrained import load_for_extraction
    from causalpos.models.settings import training_settings
    from causalpos.models.snapshots import load_snapshot
    from causalpos.models.blocks import Blocks
    from causalpos.models.train import Context, heldout_loss

    started = time.perf_counter()
    info = read_json(Path(model_dir) / "training.json")
    per_step = tokens_per_step(info)
    cfg = training_settings(info["training"])
    model, _ = load_for_extraction(str(model_dir), f"model {name}", device, ATTENTION_NAME, with_tokenizer=False)
    for path in snapshots.values():  # a damaged one stops the sweep before its first extraction, not midway
        verify_safetensors(path)
    # the held-out loss as training evaluates it: fp32 weights, SDPA, bf16 autocast on CUDA (Context.autocast)
    with checked_again_on_failure(model_dir):
        scorer = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").to(device).eval()
    blocks, ctx = Blocks(blocks_dir), Context(0, 1, device, False)
    evaluated = metrics.dropna(subset=["heldout_loss"]).groupby("step")["heldout_loss"].last()
    frames = {table: [] for table in EMERGENCE_TABLES}
    losses = []
    for step in sorted(snapshots):
        path = snapshots[step]
        load_snapshot(model, path)
        with _quiet_extraction():
            result = extract(
                model,
                tokens,
                name,
                "trained",
                batch_size=batch_size,
                intermediates_layer=intermediates_layer,
                probe_sequences=0,
                seed=seed,
                progress=False,
                n_groups=n_groups,
            )
        seen = step * per_step
        for table in EMERGENCE_TABLES:
            frames[table].append(getattr(result, table).assign(step=step, tokens_seen=seen))
        if step in evaluated.index:
            loss, source = float(evaluated[step]), "metrics"
        else:
            load_snapshot(scorer, path)
            loss = heldout_loss(scorer, blocks.heldout, cfg, ctx) if cfg["eval_batches"] else math.nan
            source = "computed"
        losses.append({"model": name, "step": step, "tokens_seen": seen, "heldout_loss": loss, "source": source})
        log.info(
            "emergence %s: step %d (%d tokens): extraction %.1f s, held-out loss %.4f (%s)",
            name,
            step,
            seen,
            result.seconds,
            loss,
            source,
        )
    tables = {table: pd.concat(parts, ignore_index=True) for table, parts in frames.items()}
    tables["losses"] = pd.DataFrame(losses, columns=LOSS_COLUMNS)
    return tables, time.perf_counter() - started
