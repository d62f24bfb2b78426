# Snakemake adapter for rule emergence_summary: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_emergence_summary

with log_to_file(snakemake.log[0]):
    run_emergence_summary(
        {name: list(snakemake.input[name]) for name in ("scores", "intermediates", "groups", "losses")},
        list(snakemake.input.simulations),
        dict(snakemake.params.settings),
        snakemake.output[0],
    )
