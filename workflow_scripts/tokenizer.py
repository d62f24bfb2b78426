# Snakemake adapter for rule tokenizer: read the job, call the library.
import os

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_tokenizer

with JobLog(snakemake.log[0]):
    run_tokenizer(
        snakemake.input.documents,
        tokenizer_dir=os.path.dirname(snakemake.output.tokenizer),
        tokens_dir=os.path.dirname(snakemake.output.blocks),
        **snakemake.params.kwargs,
    )
