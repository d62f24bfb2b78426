"""Rule convergence: claim 8 on the first groups of sequences of every pretrained model (do the verdicts hold as N
grows?): a table and its figure."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.analysis.claims.convergence import convergence_frame, flip_count
from causalpos.figures.convergence import plot_convergence
from causalpos.figures.style import save_figure
from causalpos.io import PartTable, write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    settings, options = job.params.settings, job.params.options
    start = time.perf_counter()
    frame = convergence_frame(
        PartTable(list(job.input.scores), "scores"),
        PartTable(list(job.input.groups), "groups"),
        thresholds=settings.get("thresholds") or None,
        n_bootstrap=settings["n_bootstrap"],
        seed=settings["seed"],
        min_groups=settings["convergence_min_groups"],
    )
    write_parquet(frame, job.output.table, {"stage": "convergence", "settings": settings, "version": __version__})
    save_figure(lambda: plot_convergence(frame, options), options, list(job.output.figures))
    log.info(
        "convergence: %d rows at N = %s, %d verdicts change with N, in %.1f s -> %s",
        len(frame),
        sorted(frame["n_sequences"].unique().tolist()),
        flip_count(frame),
        time.perf_counter() - start,
        job.output.table,
    )
