# Snakemake adapter for rule pretrained: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_pretrained

with log_to_file(snakemake.log[0]):
    run_pretrained(
        snakemake.wildcards.model,
        dict(snakemake.params.spec),
        snakemake.output[0],
    )
