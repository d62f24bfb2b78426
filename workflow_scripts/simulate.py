# Snakemake adapter for rule simulate: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_simulation

with log_to_file(snakemake.log[0]):
    run_simulation(
        snakemake.wildcards.variant,
        snakemake.params.variant,
        snakemake.output[0],
        device=snakemake.params.device,
        threads=snakemake.threads,
        chunk_size=snakemake.params.chunk_size,
    )
