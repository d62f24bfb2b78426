# Snakemake adapter for rule emergence_summary: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_emergence_summary

with JobLog(snakemake.log[0]):
    run_emergence_summary(
        {name: list(snakemake.input[name]) for name in ("scores", "intermediates", "groups", "losses")},
        list(snakemake.input.simulations),
        list(snakemake.input.simulation_groups),
        output=snakemake.output[0],
        **snakemake.params.kwargs,
    )
