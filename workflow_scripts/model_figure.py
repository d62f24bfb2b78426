# Snakemake adapter for rule model_figure (Figures 11-16 for one model, in pages): read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_all_layers

with log_to_file(snakemake.log[0]):
    run_all_layers(snakemake.input.scores, dict(snakemake.params.options), snakemake.output[0])
