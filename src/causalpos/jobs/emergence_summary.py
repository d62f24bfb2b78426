"""Rule emergence_summary: claim 7's metrics, the non-relative amplitude and the held-out loss at every snapshot of
both trained models (analysis.emergence)."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.analysis.emergence import emergence_frame
from causalpos.io import read_tables, write_parquet

log = logging.getLogger("causalpos")
TABLES = ("scores", "intermediates", "groups", "losses")  # rule emergence's tables of each model


def run(job) -> None:
    settings = job.params.settings
    start = time.perf_counter()
    tables = {name: read_tables(list(job.input[name])).drop(columns="table", errors="ignore") for name in TABLES}
    simulations, groups = list(job.input.simulations), list(job.input.simulation_groups)
    frame = emergence_frame(
        tables["scores"],
        tables["intermediates"],
        tables["groups"],
        tables["losses"],
        read_tables(simulations) if simulations else None,
        n_bootstrap=settings["n_bootstrap"],
        seed=settings["seed"],
        simulation_groups=read_tables(groups) if groups else None,
    )
    write_parquet(frame, job.output[0], {"stage": "emergence_summary", "settings": settings, "version": __version__})
    log.info("emergence summary: %d rows in %.1f s -> %s", len(frame), time.perf_counter() - start, job.output[0])
