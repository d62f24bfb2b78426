"""Rule runtimes: the run times of the expensive jobs (Snakemake's benchmark files, and the Parquet metadata of the
jobs that record their own) to a table and an HTML page for the report."""

from __future__ import annotations

import logging

from causalpos import __version__
from causalpos.analysis.runtimes import MISSING, runtime_frame, runtime_html
from causalpos.io import atomic_path, write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    inputs, timed = job.input, job.params.benchmarks
    benchmarks = {  # each benchmark with a file of the same job whose metadata names its device
        "train": list(zip(timed["train"], inputs.train_metrics)),
        "emergence": list(zip(timed["emergence"], inputs.emergence_scores)),
        "recursion": list(zip(timed["recursion"], inputs.recursion_table)),
    }
    frame = runtime_frame(benchmarks, {"simulate": list(inputs.simulate), "extract": list(inputs.extract)})
    write_parquet(frame, job.output.table, {"stage": "runtimes", "version": __version__})
    with atomic_path(job.output.html) as tmp:
        tmp.write_text(runtime_html(frame, job.params.get("model_labels") or {}))
    for missing in frame.loc[frame["source"] == MISSING, "job"]:
        log.warning(
            "runtimes: no benchmark file for %s (measured by a run whose timing was deleted): reported missing", missing
        )
    log.info(
        "runtimes: %d jobs, %.0f s in all -> %s, %s",
        len(frame),
        frame["seconds"].sum(),
        job.output.table,
        job.output.html,
    )
