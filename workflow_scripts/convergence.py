# Snakemake adapter for rules convergence and paper_llms_convergence: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_convergence

with log_to_file(snakemake.log[0]):
    run_convergence(
        {name: list(snakemake.input[name]) for name in snakemake.input.keys()},
        dict(snakemake.params.settings),
        snakemake.output.table,
        list(snakemake.output.figures),
        dict(snakemake.params.options),
    )
