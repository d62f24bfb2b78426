"""Rule pattern_ablation: a trained model's held-out loss at every length with its non-relative pattern taken out,
and the controls (models.pattern_ablation, issue 27), to Parquet."""

from __future__ import annotations

import logging
import os
import time

from causalpos import __version__
from causalpos.catalogue.models import parse_run
from causalpos.io import write_parquet
from causalpos.models.intervention import ablate_trained
from causalpos.runtime.devices import resolve_device

log = logging.getLogger("causalpos")


def run(job) -> None:
    p = job.params
    model, seed = parse_run(job.wildcards.model)
    training_seed = p.training_seed if seed is None else seed
    start = time.perf_counter()
    device = resolve_device(p.device, "training.device")
    frame = ablate_trained(
        os.path.dirname(job.input.model),
        os.path.dirname(job.input.blocks),
        p.factors,
        p.max_sequences,
        p.n_estimate,
        p.seed,
        device=device,
        model_name=model,
        training_seed=training_seed,
    )
    write_parquet(
        frame,
        job.output[0],
        {
            "stage": "pattern_ablation",
            "seed": p.seed,
            "training_seed": training_seed,
            "device": str(device),
            "seconds": time.perf_counter() - start,
            "version": __version__,
        },
    )
    log.info("pattern ablation in %.1f s:\n%s", time.perf_counter() - start, frame.to_string(index=False))
