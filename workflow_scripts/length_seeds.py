# Snakemake adapter for rule length_seeds: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_length_seeds

kwargs = snakemake.params.kwargs
with JobLog(snakemake.log[0]):
    run_length_seeds(
        [(model, seed, path) for (model, seed), path in zip(kwargs["runs"], snakemake.input.runs)],
        snakemake.output.table,
        list(snakemake.output.figures),
        kwargs["options"],
    )
