# Snakemake adapter for rule theory: read the job, call the library.
from causalpos.stages import log_to_file, run_theory

with log_to_file(snakemake.log[0]):
    run_theory(snakemake.params.seq_len, snakemake.params.alphas, snakemake.output[0])
