# Snakemake adapter for rule theory: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_theory

with JobLog(snakemake.log[0]):
    run_theory(output=snakemake.output[0], **snakemake.params.kwargs)
