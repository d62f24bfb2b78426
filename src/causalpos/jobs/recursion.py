"""Rule recursion: the large-d recursion (simulation.recursion) of every simulation variant, with its finite-d
correction where it is cheap, to one table."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.io import write_parquet
from causalpos.simulation.recursion import cheap_correction, recursion_table
from causalpos.simulation.variant import Variant

log = logging.getLogger("causalpos")


def run(job) -> None:
    variants = job.params.variants  # {name: Variant params}
    start = time.perf_counter()
    built = {name: Variant(**params) for name, params in variants.items()}
    frame = recursion_table(built)
    seconds = time.perf_counter() - start
    write_parquet(
        frame,
        job.output[0],
        {"stage": "recursion", "variants": variants, "seconds": seconds, "device": "cpu", "version": __version__},
    )  # numpy: the run-time table's
    corrected = [name for name, v in built.items() if cheap_correction(v)]
    log.info(
        "recursion: %d variants (%d with the finite-d correction), %d rows in %.1f s -> %s",
        len(built),
        len(corrected),
        len(frame),
        seconds,
        job.output[0],
    )
