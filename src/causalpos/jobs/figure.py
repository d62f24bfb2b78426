"""Rule figure: one figure of the paper (or ours) from the Parquet results; each input name is a table the figure
reads (catalogue.figures)."""

from __future__ import annotations

import logging
import time

from causalpos.figures.render import render_figure
from causalpos.io import read_tables

log = logging.getLogger("causalpos")


def run(job) -> None:
    figure, outputs = job.wildcards.figure, list(job.output)
    start = time.perf_counter()
    tables = {name: read_tables(list(paths)) for name, paths in job.input.items() if len(paths)}
    render_figure(figure, tables, job.params.options, outputs)
    log.info("figure %s: %.1f s -> %s", figure, time.perf_counter() - start, ", ".join(map(str, outputs)))
