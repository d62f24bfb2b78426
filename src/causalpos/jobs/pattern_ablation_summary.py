"""Rule pattern_ablation_summary: every model's ablation table in one (results/summary; results/seeds/summary over
every training seed, target length_seeds), and its figure."""

from __future__ import annotations

import logging

from causalpos import __version__
from causalpos.catalogue.tables import require_columns
from causalpos.figures.ablation import fig_pattern_ablation
from causalpos.figures.style import save_figure
from causalpos.io import read_tables, write_parquet
from causalpos.models.pattern_ablation import ABLATION_COLUMNS

log = logging.getLogger("causalpos")


def run(job) -> None:
    tables = list(job.input.tables)
    frame = require_columns(read_tables(tables), ABLATION_COLUMNS, "pattern_ablation")[ABLATION_COLUMNS]
    frame = frame.sort_values(["kind", "model", "seed", "factor"], kind="stable", ignore_index=True)
    write_parquet(
        frame,
        job.output.table,
        {"stage": "pattern_ablation_summary", "tables": [str(t) for t in tables], "version": __version__},
    )
    save_figure(
        lambda: fig_pattern_ablation({"pattern_ablation": frame}, job.params.options),
        job.params.options,
        list(job.output.figures),
    )
    log.info("pattern ablation: %d rows of %d models -> %s", len(frame), frame["model"].nunique(), job.output.table)
