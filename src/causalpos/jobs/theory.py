"""Rule theory: the closed forms of Eq. 4 (layer 2 of the parameter-free decoder) to Parquet."""

from __future__ import annotations

import logging

from causalpos import __version__
from causalpos.io import write_parquet
from causalpos.simulation.theory import theory_frame

log = logging.getLogger("causalpos")


def run(job) -> None:
    frame = theory_frame(job.params.seq_len, job.params.alphas)
    write_parquet(frame, job.output[0], {"stage": "theory", "version": __version__})
    log.info(
        "theory: %d rows for alphas %s, seq_len %d -> %s",
        len(frame),
        list(job.params.alphas),
        job.params.seq_len,
        job.output[0],
    )
