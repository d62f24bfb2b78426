# Snakemake adapter for rule runtimes: read the job, call the library.
from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_runtimes

inputs = snakemake.input
with JobLog(snakemake.log[0]):
    run_runtimes(
        {  # each benchmark with a file of the same job whose metadata names its device
            "train": list(zip(inputs.train, inputs.train_metrics)),
            "emergence": list(zip(inputs.emergence, inputs.emergence_scores)),
            "recursion": list(zip(inputs.recursion, inputs.recursion_table)),
        },
        {"simulate": list(inputs.simulate), "extract": list(inputs.extract)},
        snakemake.output.table,
        snakemake.output.html,
    )
