# Snakemake adapter for rule emergence: read the job, call the library.
import os
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.models.snapshots import snapshot_name
from causalpos.workflow.stages import log_to_file, run_emergence

with log_to_file(snakemake.log[0]):
    run_emergence(
        snakemake.wildcards.model,
        dict(snakemake.params.settings),
        os.path.dirname(snakemake.input.model),
        [os.path.join(snakemake.input.snapshots, snapshot_name(step)) for step in snakemake.params.steps],
        snakemake.input.tokens,
        os.path.dirname(snakemake.input.blocks),
        snakemake.input.metrics,
        dict(snakemake.output.items()),
        device=snakemake.params.device,
        seed=snakemake.params.seed,
    )
