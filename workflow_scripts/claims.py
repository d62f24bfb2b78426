# Snakemake adapter for rules claims and paper_llms_claims: read the job, call the library.
import os
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_claims

with log_to_file(snakemake.log[0]):
    run_claims(
        {name: list(snakemake.input[name]) for name in snakemake.input.keys()},
        dict(snakemake.params.settings),
        snakemake.output.table,
        snakemake.output.markdown,
        os.path.dirname(snakemake.output.figures[0]),  # the folder of the pages snakemake.output.figures names
        dict(snakemake.params.options),
        claim=snakemake.params.get("claim"),
    )
