# Snakemake adapter for rule length_eval: read the job, call the library.
import os
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_length_eval

with log_to_file(snakemake.log[0]):
    run_length_eval(
        os.path.dirname(snakemake.input.model),
        os.path.dirname(snakemake.input.blocks),
        list(snakemake.params.factors),
        snakemake.params.max_sequences,
        snakemake.output[0],
        device=snakemake.params.device,
    )
