import re
import sys
from pathlib import Path

# The workflow runs the library of its own checkout, whatever else is installed.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from causalpos.config import (
    ALL_LAYERS_FIGURE,
    CLAIMS_FIGURE,
    CLAIMS_TABLE,
    claims_inputs as config_claims_inputs,
    FIGURE_CAPTIONS,
    MODELS,
    extracted_models,
    extraction_settings as config_extraction_settings,
    model_location,
    figure_inputs as config_figure_inputs,
    figure_options,
    simulation_table,
    validate_config,
    variant_params,
)
from causalpos.variant import Variant
from snakemake import io as snakemake_io  # a line opening with `report` is a directive
from causalpos.stages import code_digest
from causalpos.summary import SUMMARY_FILES

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
EXTRACTED = extracted_models(config)
SUMMARY_TABLES = [f"results/summary/{name}" for name in SUMMARY_FILES.values()]


wildcard_constraints:
    variant="|".join(map(re.escape, VARIANTS)),
    figure="|".join(map(re.escape, FIGURES)) or "(?!)",
    model="|".join(map(re.escape, EXTRACTED)),


def all_simulations():
    return [simulation_table(v) for v in VARIANTS]


def report_figures(stem, caption="../report/figure.rst", category="Figures"):
    """One figure in every configured format, each shown in `snakemake --report`."""
    return [
        snakemake_io.report(
            f"results/figures/{stem}{ext}",
            caption=caption,
            category=category,
            subcategory=lambda wildcards: figure_section(stem.format(**wildcards)),
            labels={"figure": stem, "format": ext[1:]},
        )
        for ext in FIGURE_EXTENSIONS
    ]


def figure_section(name):
    """The report's subcategory of a figure: the part of the paper it belongs to."""
    figure = ALL_LAYERS_FIGURE if name.startswith(ALL_LAYERS_FIGURE) else name
    return FIGURE_CAPTIONS[figure][0] if figure in FIGURE_CAPTIONS else "Figures"


def claims_inputs(wildcards):
    return config_claims_inputs(config)


def figure_caption(wildcards):
    figure = wildcards.get("figure", ALL_LAYERS_FIGURE)
    return FIGURE_CAPTIONS.get(figure, ("", figure))[1]


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


def pretrained_spec(wildcards):
    return config["extraction"]["pretrained"]["models"][wildcards.model]


def is_pretrained(model):
    return model not in MODELS


def extraction_inputs(wildcards):
    """Trained twins: their folder and the snippets; pretrained: the held-out documents (and the GGUF copy)."""
    model = wildcards.model
    if not is_pretrained(model):
        return {
            "model": f"results/models/{model}/model.safetensors",
            "tokens": f"{TOKENS_DIR}/snippets.npy",
        }
    inputs = {"documents": DOCUMENTS}
    if "gguf" in pretrained_spec(wildcards):
        inputs["model"] = f"results/pretrained/{model}"
    return inputs


def extraction_settings_param(wildcards):
    return config_extraction_settings(config, wildcards.model)


def model_location_param(wildcards):
    return model_location(config, wildcards.model)


def model_figure_options(wildcards):
    return {**config["plot"], "model": wildcards.model}


def all_model_figures():
    return [
        f"results/figures/fig_all_layers_{model}{ext}"
        for model in EXTRACTED
        for ext in FIGURE_EXTENSIONS
    ]
