# Snakemake adapter for rule length_eval: read the job, call the library.
import os

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_length_eval

with JobLog(snakemake.log[0]):
    run_length_eval(
        os.path.dirname(snakemake.input.model),
        os.path.dirname(snakemake.input.blocks),
        output=snakemake.output[0],
        **snakemake.params.kwargs,
    )
