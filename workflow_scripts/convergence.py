# Snakemake adapter for rules convergence and paper_llms_convergence: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_convergence

with JobLog(snakemake.log[0]):
    run_convergence(
        {name: list(snakemake.input[name]) for name in snakemake.input.keys()},
        table=snakemake.output.table,
        figures=list(snakemake.output.figures),
        **snakemake.params.kwargs,
    )
