# Snakemake adapter for rule train: read the job, call the library.
import os
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_train

with log_to_file(snakemake.log[0]):
    run_train(
        snakemake.wildcards.model,
        dict(snakemake.params.settings),
        os.path.dirname(snakemake.input.blocks),
        os.path.dirname(snakemake.input.tokenizer),
        os.path.dirname(snakemake.output.model),
        snakemake.params.checkpoint_root,
        processes=snakemake.params.processes,
    )
