# Snakemake adapter for rule figure: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_figure

with log_to_file(snakemake.log[0]):
    run_figure(
        snakemake.wildcards.figure,
        {name: list(paths) for name, paths in snakemake.input.items()},
        dict(snakemake.params.options),
        list(snakemake.output),
    )
