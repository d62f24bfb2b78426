# Snakemake adapter for rule pattern_ablation_pretrained: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_pattern_ablation_pretrained

with JobLog(snakemake.log[0]):
    run_pattern_ablation_pretrained(
        documents=snakemake.input.documents, output=snakemake.output[0], **snakemake.params.kwargs
    )
