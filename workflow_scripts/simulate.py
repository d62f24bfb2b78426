# Snakemake adapter for rule simulate: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_simulation

with JobLog(snakemake.log[0]):
    run_simulation(
        snakemake.wildcards.variant,
        output=snakemake.output.table,
        groups_output=snakemake.output.groups,
        threads=snakemake.threads,
        **snakemake.params.kwargs,
    )
