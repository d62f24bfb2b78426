"""Rule config_record: the configuration the run used (defaults filled in by validation) as an HTML page for the
report (Snakemake 9's report does not show the config files)."""

from __future__ import annotations

import html
import logging

import yaml

from causalpos.io import atomic_path

log = logging.getLogger("causalpos")


def run(job) -> None:
    text = yaml.safe_dump(job.params.config, sort_keys=False, default_flow_style=None)
    with atomic_path(job.output[0]) as tmp:
        tmp.write_text(
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Configuration</title></head>"
            f"<body><pre>{html.escape(text)}</pre></body></html>"
        )
    log.info("configuration -> %s", job.output[0])
