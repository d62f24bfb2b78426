# Snakemake adapter for rule train: read the job, call the library.
import os

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_train

with JobLog(snakemake.log[0]):
    run_train(
        snakemake.wildcards.model,
        tokens_dir=os.path.dirname(snakemake.input.blocks),
        tokenizer_dir=os.path.dirname(snakemake.input.tokenizer),
        out_dir=os.path.dirname(snakemake.output.model),
        checkpoint_root=snakemake.params.checkpoint_root,
        **snakemake.params.kwargs,
    )
