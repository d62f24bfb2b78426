# Snakemake adapter for rule window_test: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_window_test

with JobLog(snakemake.log[0]):
    run_window_test(
        {name: list(snakemake.input[name]) for name in snakemake.input.keys()},
        output=snakemake.output[0],
        **snakemake.params.kwargs,
    )
