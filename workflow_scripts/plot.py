# Snakemake adapter for rule figure: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_figure

with JobLog(snakemake.log[0]):
    run_figure(
        snakemake.wildcards.figure,
        {name: list(paths) for name, paths in snakemake.input.items()},
        outputs=list(snakemake.output),
        **snakemake.params.kwargs,
    )
