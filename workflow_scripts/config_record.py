# Snakemake adapter for rule config_record: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_config_record

with JobLog(snakemake.log[0]):
    run_config_record(output=snakemake.output[0], **snakemake.params.kwargs)
