"""Rule environment: the software the run used (Python, the platform, causalpos and the packages whose versions
decide its numbers, the GPU where there is one), a row each, beside its results.

The versions are the rule's params, read where the workflow runs: a changed package reruns this record."""

from __future__ import annotations

import logging

import pandas as pd

from causalpos import __version__
from causalpos.catalogue.tables import table
from causalpos.io import write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    versions = job.params.versions
    frame = pd.DataFrame(
        [{"name": name, "version": str(version)} for name, version in versions.items()],
        columns=list(table("environment").columns),
    )
    write_parquet(frame, job.output[0], {"stage": "environment", "version": __version__})
    log.info("environment: %s -> %s", ", ".join(f"{n} {v}" for n, v in versions.items()), job.output[0])
