# Snakemake adapter for rule recursion: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_recursion

with JobLog(snakemake.log[0]):
    run_recursion(output=snakemake.output[0], **snakemake.params.kwargs)
