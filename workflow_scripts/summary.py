# Snakemake adapter for rule summary: read the job, call the library.
import os

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_summary

with JobLog(snakemake.log[0]):
    run_summary(
        list(snakemake.input.scores),
        list(snakemake.input.probe),
        os.path.dirname(snakemake.output[0]),
    )
