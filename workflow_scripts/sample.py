# Snakemake adapter for rule sample: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_sample

with JobLog(snakemake.log[0]):
    run_sample(output=snakemake.output[0], **snakemake.params.kwargs)
