# Snakemake adapter for rule sample: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_sample

with log_to_file(snakemake.log[0]):
    run_sample(
        list(snakemake.params.sources),
        snakemake.params.heldout_fraction,
        snakemake.params.seed,
        snakemake.params.max_documents,
        snakemake.output[0],
    )
