"""Rule summary: the measured claims of Sections 4.2 and 5.2 per model and layer (analysis.summary), to
results/summary/, the scores read a layer at a time."""

from __future__ import annotations

import logging
import os

from causalpos.analysis.summary import write_summaries
from causalpos.io import PartTable, read_tables

log = logging.getLogger("causalpos")


def run(job) -> None:
    written = write_summaries(
        PartTable(list(job.input.scores), "scores"), read_tables(list(job.input.probe)), os.path.dirname(job.output[0])
    )
    log.info("summary -> %s", ", ".join(map(str, written.values())))
