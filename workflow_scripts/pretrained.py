# Snakemake adapter for rule pretrained: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_pretrained

with JobLog(snakemake.log[0]):
    run_pretrained(snakemake.wildcards.model, out_dir=snakemake.output[0], **snakemake.params.kwargs)
