# Snakemake adapter for rules extract and paper_llms_extract: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_extract

with log_to_file(snakemake.log[0]):
    run_extract(
        snakemake.wildcards.model,
        dict(snakemake.params.settings),
        snakemake.params.location,
        dict(snakemake.output.items()),
        documents=snakemake.input.get("documents"),
        snippets=snakemake.input.get("tokens"),
        device=snakemake.params.device,
        seed=snakemake.params.seed,
        state_dir=snakemake.params.state,
    )
