"""Rule model_figure: Figures 11-16 of one extracted model, every page of fig_all_layers in every format of
options["formats"]; pages of an earlier run that this one did not write are removed."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from causalpos.catalogue.figures import ALL_LAYERS_PAGE, all_layers_page
from causalpos.figures.render import render_all_layers
from causalpos.io import PartTable

log = logging.getLogger("causalpos")


def run(job) -> None:
    options = job.params.options
    start = time.perf_counter()
    folder = Path(job.output[0])
    folder.mkdir(parents=True, exist_ok=True)
    formats = options.get("formats") or ["pdf", "png"]
    written = render_all_layers(
        {"scores": PartTable([job.input.scores], "scores")},
        options,
        lambda kind, first, last: [all_layers_page(folder, kind, first, last, fmt) for fmt in formats],
    )
    stale = set(folder.glob(ALL_LAYERS_PAGE.format(kind="*", layers="*", ext="*"))) - {Path(p) for p in written}
    for path in stale:
        path.unlink()
    log.info(
        "fig_all_layers %s: %d files in %.1f s -> %s",
        options.get("model"),
        len(written),
        time.perf_counter() - start,
        folder,
    )
