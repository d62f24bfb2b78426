"""Rule simulate: the Monte Carlo of one simulation variant (simulation.engine) to Parquet, its mean scores and its
score sums per group of sample blocks (the claims' standard errors)."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.io import write_parquet
from causalpos.runtime.devices import available_cpus, usage_since
from causalpos.simulation.engine import groups_frame, result_frame, simulate
from causalpos.simulation.variant import Variant

log = logging.getLogger("causalpos")


def run(job) -> None:
    import torch

    name, variant = job.wildcards.variant, Variant(**job.params.variant)
    if job.threads:
        torch.set_num_threads(max(1, min(job.threads, available_cpus())))
    log.info("simulate %s: %s on %s, %d threads", name, variant.params(), job.params.device, torch.get_num_threads())
    marks = set()

    def progress(done, total):
        decile = 10 * done // total
        if decile not in marks:
            marks.add(decile)
            log.info("  %3d%%  %d/%d samples", 10 * decile, done, total)

    cpu_start = time.process_time()
    result = simulate(variant, device=job.params.device, chunk_size=job.params.chunk_size, progress=progress)
    metadata = {
        "stage": "simulate",
        "variant": name,
        "params": variant.params(),
        "sampler": result.sampler,
        "device": result.device,
        "seconds": result.seconds,
        **usage_since(cpu_start),
        "version": __version__,
    }
    write_parquet(groups_frame(result, name), job.output.groups, metadata)
    write_parquet(result_frame(result, name), job.output.table, metadata)
    rate = variant.n_samples / max(result.seconds, 1e-9)
    log.info(
        "simulate %s: %.2f s (%.0f samples/s, %s sampler, %s) -> %s",
        name,
        result.seconds,
        rate,
        result.sampler,
        result.device,
        job.output.table,
    )
