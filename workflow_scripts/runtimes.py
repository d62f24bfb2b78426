# Snakemake adapter for rule runtimes: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_runtimes

with log_to_file(snakemake.log[0]):
    run_runtimes(
        {"train": list(snakemake.input.train), "emergence": list(snakemake.input.emergence)},
        {"simulate": list(snakemake.input.simulate), "extract": list(snakemake.input.extract)},
        snakemake.output.table,
        snakemake.output.html,
    )
