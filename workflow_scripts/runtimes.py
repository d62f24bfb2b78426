# Snakemake adapter for rule runtimes: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_runtimes

inputs = snakemake.input
with log_to_file(snakemake.log[0]):
    run_runtimes(
        {  # each benchmark with a file of the same job whose metadata names its device
            "train": list(zip(inputs.train, inputs.train_metrics)),
            "emergence": list(zip(inputs.emergence, inputs.emergence_scores)),
        },
        {"simulate": list(inputs.simulate), "extract": list(inputs.extract)},
        snakemake.output.table,
        snakemake.output.html,
    )
