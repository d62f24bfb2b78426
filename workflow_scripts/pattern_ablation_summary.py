# Snakemake adapter for rules pattern_ablation_summary and pattern_ablation_seeds: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_pattern_ablation_summary

with JobLog(snakemake.log[0]):
    run_pattern_ablation_summary(
        list(snakemake.input.tables),
        snakemake.output.table,
        list(snakemake.output.figures),
        **snakemake.params.kwargs,
    )
