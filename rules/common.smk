import re
import sys
from pathlib import Path

# The workflow runs the library of its own checkout, whatever else is installed.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from causalpos.config import (
    MODELS,
    figure_inputs as config_figure_inputs,
    figure_options,
    simulation_table,
    validate_config,
    variant_params,
)
from causalpos.variant import Variant
from causalpos.stages import code_digest

# Snakemake's own validate (inside) against the JSON schema, plus cross-key
# checks; a bad config stops here, before any job, naming the key.
validate_config(config)

VARIANTS = list(config["simulation"]["variants"])
FIGURES = list(config["figures"])
FIGURE_EXTENSIONS = [f".{fmt}" for fmt in config["plot"]["formats"]]
THEORY_TABLE = "results/theory/layer2_scores.parquet"
DOCUMENTS = "results/data/documents.parquet"
TOKENIZER_DIR = "results/tokenizer"
TOKENS_DIR = "results/tokens"


wildcard_constraints:
    variant="|".join(map(re.escape, VARIANTS)),
    figure="|".join(map(re.escape, FIGURES)) or "(?!)",
    model="|".join(MODELS),


def all_simulations():
    return [simulation_table(v) for v in VARIANTS]


def figure_files(figure):
    return [f"results/figures/{figure}{ext}" for ext in FIGURE_EXTENSIONS]


def all_figure_files():
    return [path for figure in FIGURES for path in figure_files(figure)]


def figure_inputs(wildcards):
    return config_figure_inputs(config, wildcards.figure)


def training_settings_param(wildcards):
    """The training section as configured (defaults live in causalpos.train, covered by its code digest)."""
    return dict(config.get("training") or {})


def variant_settings(wildcards):
    """All parameters of the variant (defaults filled in): a change reruns only it."""
    return Variant(**variant_params(config, wildcards.variant)).params()


def plot_settings(wildcards):
    return figure_options(config, wildcards.figure)
