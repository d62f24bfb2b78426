# Snakemake adapter for rule heads: read the job, call the library.
from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_heads

with JobLog(snakemake.log[0]):
    run_heads(
        list(snakemake.input.head_scores),
        output=snakemake.output[0],
        **snakemake.params.kwargs,
    )
