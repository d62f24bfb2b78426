# Snakemake adapter for rule emergence: read the job, call the library.
import os

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_emergence

with JobLog(snakemake.log[0]):
    run_emergence(
        snakemake.wildcards.model,
        model_dir=os.path.dirname(snakemake.input.model),
        snapshots_dir=snakemake.input.snapshots,
        snippets=snakemake.input.tokens,
        blocks_dir=os.path.dirname(snakemake.input.blocks),
        metrics=snakemake.input.metrics,
        outputs=dict(snakemake.output.items()),
        **snakemake.params.kwargs,
    )
