"""Rule length_seeds_table: length generalisation over training seeds (target length_seeds), every run's
length_eval table to one table and its figure."""

from __future__ import annotations

import logging

import pandas as pd

from causalpos import __version__
from causalpos.analysis.lengths import length_seed_frame, paired_differences, with_gaps
from causalpos.figures.style import save_figure
from causalpos.figures.training import fig_length_seeds
from causalpos.io import read_table, write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    runs = [(model, int(seed), path) for (model, seed), path in zip(job.params.runs, job.input.runs)]
    per_seed = pd.concat(
        [read_table(path).assign(model=model, seed=seed) for model, seed, path in runs], ignore_index=True
    )
    frame = length_seed_frame(per_seed)
    write_parquet(
        frame, job.output.table, {"stage": "length_seeds", "runs": [[m, s] for m, s, _ in runs], "version": __version__}
    )
    gaps = with_gaps(per_seed)
    tables = {"length_seeds": frame, "length_eval": gaps, "length_pairs": paired_differences(gaps)}
    options = job.params.options
    save_figure(lambda: fig_length_seeds(tables, options), options, list(job.output.figures))
    log.info("length over seeds:\n%s", frame.to_string(index=False))
