# Snakemake adapter for rule tokenizer: read the job, call the library.
import os
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_tokenizer

p = snakemake.params
with log_to_file(snakemake.log[0]):
    run_tokenizer(
        snakemake.input[0],
        p.name,
        p.vocab_size,
        p.block_len,
        p.snippet_len,
        p.n_snippets,
        p.seed,
        os.path.dirname(snakemake.output.tokenizer),
        os.path.dirname(snakemake.output.blocks),
    )
