# Snakemake adapter for rule model_figure (Figures 11-16 for one model, in pages): read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_all_layers

with JobLog(snakemake.log[0]):
    run_all_layers(snakemake.input.scores, folder=snakemake.output[0], **snakemake.params.kwargs)
