# Snakemake adapter for rules pattern_ablation and pattern_ablation_seed: read the job, call the library.
import os

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_pattern_ablation

with JobLog(snakemake.log[0]):
    run_pattern_ablation(
        model_dir=os.path.dirname(snakemake.input.model),
        tokens_dir=os.path.dirname(snakemake.input.blocks),
        output=snakemake.output[0],
        **snakemake.params.kwargs,
    )
