# Snakemake adapter for rule summary: read the job, call the library.
import os
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_summary

with log_to_file(snakemake.log[0]):
    run_summary(
        list(snakemake.input.scores),
        list(snakemake.input.probe),
        os.path.dirname(snakemake.output[0]),
    )
