"""Rule heads: each attention head's non-relative amplitude and first-key emphasis (analysis.heads), every extracted
model, read a layer at a time (SmolLM2-135M's table: 8.9M rows)."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.analysis.heads import heads_frame, layers_of
from causalpos.io import PartTable, write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    start = time.perf_counter()
    table = PartTable(list(job.input.head_scores), "head_scores")
    frame = heads_frame(layers_of(table))
    write_parquet(frame, job.output[0], {"stage": "heads", "version": __version__})
    models = frame["model"].nunique()
    log.info(
        "heads: %d rows (%d models) in %.1f s -> %s%s",
        len(frame),
        models,
        time.perf_counter() - start,
        job.output[0],
        "" if models else " (no per-head maps: extraction.per_head is off)",
    )
