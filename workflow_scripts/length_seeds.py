# Snakemake adapter for rule length_seeds: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_length_seeds

with log_to_file(snakemake.log[0]):
    run_length_seeds(
        [(model, seed, path) for (model, seed), path in zip(snakemake.params.runs, snakemake.input)],
        snakemake.output.table,
        list(snakemake.output.figures),
        dict(snakemake.params.options),
    )
