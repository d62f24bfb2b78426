"""Rule controls_table: claim 8's metrics of every pretrained LLM on each condition's sequences, in one table
(`snakemake mask_controls`, not part of `all`; analysis.controls_table; issue 43). params.conditions lists the conditions in the order of the
inputs: input.scores, input.groups and input.head_scores hold, condition after condition, one file per model of
params.models."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.analysis.heads import layers_of
from causalpos.analysis.controls_table import condition_frame, mask_controls_frame
from causalpos.figures.mask_controls import plot_mask_controls
from causalpos.figures.style import save_figure
from causalpos.io import PartTable, write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    conditions, models, settings = job.params.conditions, job.params.models, job.params.settings
    start = time.perf_counter()
    files = list(zip(job.input.scores, job.input.groups, job.input.head_scores))
    if len(files) != len(conditions) * len(models):
        raise ValueError(f"mask_controls: {len(files)} sets of tables for {len(conditions)} x {len(models)}")
    parts = []
    for index, (scores, groups, heads) in enumerate(files):
        condition, model = conditions[index // len(models)], models[index % len(models)]
        part = condition_frame(
            condition,
            PartTable(scores, "scores"),
            PartTable(groups, "groups").select(quantity="scores"),
            layers_of(PartTable(heads, "head_scores")),
            settings["n_bootstrap"],
            settings["seed"],
        )
        parts.append(part)
        log.info(
            "mask controls: %s on %s (%d of %d) in %.0f s",
            model,
            condition,
            index + 1,
            len(files),
            time.perf_counter() - start,
        )
    frame = mask_controls_frame(parts)
    meta = {"stage": "mask_controls", "conditions": conditions, "models": models, "settings": settings}
    write_parquet(frame, job.output.table, {**meta, "version": __version__})
    save_figure(lambda: plot_mask_controls(frame, job.params.options), job.params.options, list(job.output.figures))
    log.info("mask controls: %d rows in %.1f s -> %s", len(frame), time.perf_counter() - start, job.output.table)
