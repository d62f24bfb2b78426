# Snakemake adapter for rule figure: read the job, call the library.
from causalpos.stages import log_to_file, run_figure

with log_to_file(snakemake.log[0]):
    run_figure(
        snakemake.wildcards.figure,
        list(snakemake.input.simulation),
        snakemake.input.theory[0] if snakemake.input.theory else None,
        dict(snakemake.params.options),
        list(snakemake.output),
    )
