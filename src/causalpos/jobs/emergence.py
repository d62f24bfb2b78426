"""Rule emergence: Section 4.2's extraction and the held-out loss at every training snapshot of a trained model,
to Parquet."""

from __future__ import annotations

import logging
import os

from causalpos import __version__
from causalpos.catalogue.paths import snapshot_name
from causalpos.io import read_array, read_table, write_parquet
from causalpos.models.emergence import emergence_tables
from causalpos.runtime.devices import resolve_device

log = logging.getLogger("causalpos")


def run(job) -> None:
    p, name = job.params, job.wildcards.model
    settings = p.settings
    device = resolve_device(p.device, "extraction.device")
    snapshots = {step: os.path.join(job.input.snapshots, snapshot_name(step)) for step in p.steps}
    tables, seconds = emergence_tables(
        os.path.dirname(job.input.model),
        snapshots,
        read_array(job.input.tokens),
        os.path.dirname(job.input.blocks),
        read_table(job.input.metrics),
        name,
        device,
        batch_size=settings["batch_size"],
        intermediates_layer=settings["intermediates_layer"],
        n_groups=settings["bootstrap_groups"],
        seed=p.seed,
    )
    meta = {
        "stage": "emergence",
        "model": name,
        "settings": settings,
        "device": str(device),
        "seconds": seconds,
        "version": __version__,
    }
    for table, frame in tables.items():
        write_parquet(frame.assign(table=table), job.output[table], meta)
    log.info(
        "emergence %s: %d snapshots in %.1f s -> %s", name, len(snapshots), seconds, ", ".join(map(str, job.output))
    )
