"""Rule length_eval: a trained model's held-out loss at 1x, 2x, 4x its training length (Section 5.2's length
generalisation, our measurement)."""

from __future__ import annotations

import logging
import os

from causalpos import __version__
from causalpos.io import write_parquet
from causalpos.models.length_eval import evaluate_lengths

log = logging.getLogger("causalpos")


def run(job) -> None:
    p = job.params
    frame = evaluate_lengths(
        os.path.dirname(job.input.model),
        os.path.dirname(job.input.blocks),
        factors=p.factors,
        max_sequences=p.max_sequences,
        device=p.device,
    )
    write_parquet(frame, job.output[0], {"stage": "length_eval", "version": __version__})
    log.info("length generalisation:\n%s", frame.to_string(index=False))
