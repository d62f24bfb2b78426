# Snakemake adapter for rule config_record: read the job, call the library.
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # this checkout's library

from causalpos.workflow.stages import log_to_file, run_config_record

with log_to_file(snakemake.log[0]):
    run_config_record(dict(snakemake.params.config), snakemake.output[0])
