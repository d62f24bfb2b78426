"""What every result was made from: a digest of the settings and code behind it, all the way up the DAG.

Snakemake reruns a job when its own params change, but it does not look past a missing input: when a
changed simulation (or training) job is killed, its output is gone, the figures that read it are
still there with unchanged params, and the next run says "Nothing to be done" although they show the
old setting. So every rule that reads results also gets, as a param, the digest of what its inputs
were made from (`upstream`): a change of any setting or code anywhere above a job changes that param,
and the job reruns, pulling its missing inputs back in, whether or not the intermediate files exist.

A product's digest hashes the rule that makes it, the settings that rule is given, its code digest and
the digests of its own inputs. The settings are those of the rule's params in rules/*.smk.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache

from causalpos.figures.registry import FIGURES
from causalpos.simulation.variant import Variant
from causalpos.workflow.config import (MODELS, emergence_settings, emergence_variants, extracted_models,
                                       extraction_settings, figure_variants, model_location, paper_llms_figures,
                                       paper_llms_settings, pretrained_models, variant_params)
from causalpos.workflow.digest import code_digest


@lru_cache(maxsize=None)
def _code(stage: str) -> str:  # one workflow parse reads each stage's code once
    return code_digest(stage)


def _digest(*parts) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- products


def theory(config: dict) -> str:
    return _digest("theory", config["theory"], _code("theory"))


def simulation(config: dict, variant: str) -> str:
    settings = Variant(**variant_params(config, variant)).params()
    return _digest("simulate", settings, config["device"], config["simulation"]["chunk_size"],
                   _code("simulate"))


def documents(config: dict) -> str:
    return _digest("sample", config["data"], _code("sample"))


def tokens(config: dict) -> str:
    """The tokenizer and the token blocks and snippets it writes."""
    evaluation = config["evaluation"]
    return _digest("tokenizer", documents(config), config["tokenizer"], evaluation["snippet_len"],
                   evaluation["n_snippets"], config["data"]["seed"], _code("tokenizer"))


def trained_model(config: dict, model: str) -> str:
    return _digest("train", model, tokens(config), dict(config.get("training") or {}), config["train_processes"],
                   _code("train"))


def length_eval(config: dict, model: str) -> str:
    evaluation = config["evaluation"]
    return _digest("length_eval", trained_model(config, model), tokens(config), evaluation["length_factors"],
                   evaluation["length_sequences"], (config.get("training") or {}).get("device", "auto"),
                   _code("length_eval"))


def pretrained(config: dict, model: str) -> str:
    return _digest("pretrained", model, config["extraction"]["pretrained"]["models"][model],
                   _code("pretrained"))


def activations(config: dict, model: str) -> str:
    """The extraction tables of one model."""
    return _digest("extract", model, upstream(config, "extract", model=model), extraction_settings(config, model),
                   model_location(config, model), config["extraction"]["device"], config["data"]["seed"],
                   _code("extract"))


def paper_activations(config: dict, model: str) -> str:
    """The extraction tables of one pretrained model at the paper's size (target paper_llms)."""
    return _digest("paper_llms_extract", model, upstream(config, "paper_llms_extract", model=model),
                   paper_llms_settings(config, model), model_location(config, model), config["extraction"]["device"],
                   config["data"]["seed"], _code("extract"))


def emergence(config: dict, model: str) -> str:
    """The extraction tables at every snapshot of one trained model, and its losses there."""
    return _digest("emergence", model, trained_model(config, model), tokens(config), emergence_settings(config),
                   config["extraction"]["device"], config["data"]["seed"], _code("emergence"))


def emergence_summary(config: dict) -> str:
    return _digest("emergence_summary", [emergence(config, m) for m in MODELS],
                   [simulation(config, v) for v in emergence_variants(config)], config["claims"],
                   _code("emergence_summary"))


def seed_model(config: dict, model: str, seed) -> str:
    """A model trained again with another seed (evaluation.seeds)."""
    return _digest("train_seed", model, int(seed), tokens(config), dict(config.get("training") or {}),
                   config["train_processes"], _code("train"))


def seed_length_eval(config: dict, model: str, seed) -> str:
    evaluation = config["evaluation"]
    return _digest("length_eval_seed", seed_model(config, model, seed), tokens(config), evaluation["length_factors"],
                   evaluation["length_sequences"], (config.get("training") or {}).get("device", "auto"),
                   _code("length_eval"))


# ---------------------------------------------------------------- the inputs of a job


def _figure_inputs(config: dict, figure: str) -> list[str]:
    spec = FIGURES[figure]
    options = config["figures"].get(figure, {})
    reads = set(spec.tables)
    parts = [simulation(config, v) for v in figure_variants(config, figure)]
    parts += [theory(config)] if "theory" in reads else []
    parts += [trained_model(config, m) for m in MODELS] if reads & {"metrics", "blocks"} else []
    parts += [tokens(config)] if "blocks" in reads else []
    parts += [length_eval(config, m) for m in MODELS] if "length_eval" in reads else []
    parts += [emergence_summary(config)] if "emergence" in reads else []
    chosen = {"model": [options.get("model", "nope")], "trained": list(MODELS),
              "pretrained": options.get("models") or pretrained_models(config),
              "all": extracted_models(config)}.get(spec.models, [])
    return parts + [activations(config, m) for m in chosen]


def upstream(config: dict, rule: str, **wildcards) -> str:
    """The digest of what the inputs of one job of `rule` were made from ("" for a rule without inputs)."""
    model = wildcards.get("model")
    every = extracted_models(config)
    if rule == "tokenizer":
        parts = [documents(config)]
    elif rule == "train":
        parts = [tokens(config)]
    elif rule == "length_eval":
        parts = [trained_model(config, model), tokens(config)]
    elif rule == "extract":
        if model in MODELS:
            parts = [trained_model(config, model), tokens(config)]
        else:
            spec = config["extraction"]["pretrained"]["models"][model]
            parts = [documents(config)] + ([pretrained(config, model)] if "gguf" in spec else [])
    elif rule == "paper_llms_extract":
        spec = config["extraction"]["pretrained"]["models"][model]
        parts = [documents(config)] + ([pretrained(config, model)] if "gguf" in spec else [])
    elif rule in ("paper_llms_claims", "paper_llms_convergence"):
        parts = [paper_activations(config, m) for m in pretrained_models(config)]
    elif rule == "paper_llms_model_figure":
        parts = [paper_activations(config, model)]
    elif rule == "paper_llms_figure":
        parts = [paper_activations(config, m) for m in pretrained_models(config)
                 if wildcards["figure"] in paper_llms_figures(config)]
    elif rule == "convergence":
        parts = [activations(config, m) for m in pretrained_models(config)]
    elif rule in ("summary", "claims"):
        parts = [activations(config, m) for m in every]
        if rule == "claims":
            parts += [simulation(config, v) for v in config["simulation"]["variants"]] + [theory(config)]
    elif rule == "emergence":
        parts = [trained_model(config, model), tokens(config)]
    elif rule == "emergence_summary":
        parts = [emergence(config, m) for m in MODELS] + [simulation(config, v) for v in emergence_variants(config)]
    elif rule == "train_seed":
        parts = [tokens(config)]
    elif rule == "length_eval_seed":
        parts = [seed_model(config, model, wildcards["seed"]), tokens(config)]
    elif rule == "length_seeds":
        seeds = config["evaluation"].get("seeds", [])
        parts = [length_eval(config, m) for m in MODELS] + [seed_length_eval(config, m, s) for m in MODELS
                                                            for s in seeds]
    elif rule == "model_figure":
        parts = [activations(config, model)]
    elif rule == "figure":
        parts = _figure_inputs(config, wildcards["figure"])
    elif rule == "runtimes":
        parts = ([trained_model(config, m) for m in MODELS] + [simulation(config, v) for v in
                 config["simulation"]["variants"]] + [activations(config, m) for m in every]
                 + [emergence(config, m) for m in MODELS])
    elif rule in ("theory", "simulate", "sample", "pretrained", "config_record"):
        return ""
    else:
        raise ValueError(f"unknown rule {rule!r}")
    return _digest(rule, parts)
