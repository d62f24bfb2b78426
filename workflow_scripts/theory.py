# Snakemake adapter for rule theory: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_theory

with log_to_file(snakemake.log[0]):
    run_theory(snakemake.params.seq_len, snakemake.params.alphas, snakemake.output[0])
