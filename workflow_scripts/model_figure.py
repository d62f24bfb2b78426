# Snakemake adapter for rule model_figure (Figures 11-16 for one model): read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.figures.registry import ALL_LAYERS_FIGURE
from causalpos.workflow.stages import log_to_file, run_figure

with log_to_file(snakemake.log[0]):
    run_figure(
        ALL_LAYERS_FIGURE,
        {"scores": [snakemake.input.scores]},
        dict(snakemake.params.options),
        list(snakemake.output),
    )
