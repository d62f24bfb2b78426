"""What the config says each job gets: the models and runs of a config, and the settings that decide each rule's
outputs (the rules' params). Loading and checking a config is workflow.config's."""

from __future__ import annotations

import os

from causalpos.catalogue import paths
from causalpos.catalogue import figures as figure_paths
from causalpos.catalogue import models as model_records
from causalpos.catalogue.figures import FIGURES
from causalpos.catalogue.models import LIFTED, TRAINED, WINDOW_ARMS, is_trained, parse_run, seed_run
from causalpos.errors import ConfigError
from causalpos.models.pretrained import SOURCE_KEYS, model_label
from causalpos.models.settings import snapshot_schedule
from causalpos.simulation.variant import Variant


def pretrained_models(config: dict) -> list[str]:
    return list(config["extraction"]["pretrained"]["models"])


def extracted_models(config: dict) -> list[str]:
    """Every model the extraction stage analyses: the trained twins, then the pretrained LLMs."""
    return list(TRAINED) + pretrained_models(config)


def pretrained_spec(config: dict, name: str) -> dict:
    """A pretrained model's entry in the config less its `label:`, which changes its figures' titles only."""
    return {k: v for k, v in config["extraction"]["pretrained"]["models"][name].items() if k != "label"}


def pretrained_settings(config: dict, name: str) -> dict:
    """One pretrained model's source (gguf / path / name) and its sizes, defaults filled in."""
    section = config["extraction"]["pretrained"]
    spec = pretrained_spec(config, name)
    return {
        "seq_len": section["seq_len"],
        "n_sequences": section["n_sequences"],
        "batch_size": section.get("batch_size", config["extraction"]["batch_size"]),
        **spec,
    }


def extraction_settings(config: dict, model: str) -> dict:
    """Everything that decides one model's extraction tables (the rule's params: a change reruns that model)."""
    section = config["extraction"]
    common = {
        key: section[key]
        for key in ("intermediates_layer", "probe_sequences", "probe_positions", "bootstrap_groups", "per_head")
    }
    if is_trained(model):
        return {"kind": "trained", "batch_size": section["batch_size"], **common}
    # the default run takes held-out documents only (its sizes leave plenty of them)
    return {
        "kind": "pretrained",
        **pretrained_settings(config, model),
        **common,
        "splits": ["heldout"],
        "setting": "extraction.pretrained",
    }


def paper_llms_settings(config: dict, model: str) -> dict:
    """One pretrained model's extraction at the paper's size (target paper_llms): extraction_settings with the
    sizes, batch, groups, splits and per_head of extraction.paper_llms (a model's own sizes apply to the default
    run only)."""
    return target_settings(config, model, "paper_llms", ("per_head",))


TARGET_SIZES = ("seq_len", "n_sequences", "batch_size", "bootstrap_groups", "splits")


def target_settings(config: dict, model: str, section: str, extra: tuple = ()) -> dict:
    """A pretrained model's extraction for a target of its own size (extraction.<section>: paper_llms,
    window_control): extraction_settings with the model's source and the section's sizes, groups, splits and
    `extra` keys (a model's own sizes apply to the default run only)."""
    sizes = config["extraction"][section]
    spec = {k: v for k, v in config["extraction"]["pretrained"]["models"][model].items() if k in SOURCE_KEYS}
    return {
        **extraction_settings(config, model),
        **spec,
        **{key: sizes[key] for key in TARGET_SIZES + tuple(extra)},
        "setting": f"extraction.{section}",
    }


def control_settings(config: dict, model: str, condition: str) -> dict:
    """One pretrained model's extraction on a content control's sequences (target mask_controls): the default
    run's sizes, seed and splits (so `documents` would be its very sequences), the scores, groups and head maps
    only (no intermediates, no probe: claim 8's metrics read none)."""
    if is_trained(model):
        raise ValueError(f"the content controls are for the pretrained models; {model} is a trained one")
    return {
        **extraction_settings(config, model),
        "intermediates_layer": None,
        "probe_sequences": 0,
        "per_head": True,
        "condition": condition,
    }


def window_control_models(config: dict) -> list[str]:
    """The models of target window_control (extraction.window_control.models), each one of the pretrained models."""
    models = list(config["extraction"]["window_control"]["models"])
    unknown = [m for m in models if m not in pretrained_models(config)]
    if unknown:
        raise ConfigError(
            f"extraction.window_control.models: {unknown} not in extraction.pretrained.models "
            f"({pretrained_models(config)})"
        )
    return models


def window_control_settings(config: dict, model: str, arm: str) -> dict:
    """One model's extraction for the window's own effect (target window_control): the sizes, groups and splits of
    extraction.window_control, the same sequences in both arms (`windowed`: as trained; `lifted`: every layer
    global), the scores and groups only (claims 10d-10e read no others)."""
    if arm not in WINDOW_ARMS:
        raise ValueError(f"window_control: arm {arm!r}, not one of {WINDOW_ARMS}")
    return {
        **target_settings(config, model, "window_control"),
        "intermediates_layer": None,
        "probe_sequences": 0,
        "per_head": False,
        "lift_windows": arm == LIFTED,
    }


def results_dir(config: dict) -> str:
    """The results folder of a config (its `results` key; "results" by default)."""
    return config.get("results") or paths.RESULTS


def snapshot_steps(config: dict) -> list[int]:
    """The steps of the trained models' weight-only snapshots (training.snapshot_steps) of a validated config."""
    return snapshot_schedule(config["training"])


def extra_seeds(config: dict) -> list[int]:
    """The seeds of the extra trainings for the length comparison (evaluation.seeds)."""
    return [int(s) for s in config["evaluation"].get("seeds", [])]


def emergence_variants(config: dict) -> list[str]:
    """The alpha = 0 simulations claim 7b and the emergence table compare with: l2, no scaling, no PE, causal
    mask without a window, residual (the ledger picks among them by d and seq_len; claims.model_claims.alpha0_reference)."""
    chosen = []
    for name in config["simulation"]["variants"]:
        p = Variant(**variant_params(config, name)).params()
        if (
            float(p["alpha"]) == 0.0
            and p["norm"] == "l2"
            and p["scale"] == "none"
            and p["pe"] == "none"
            and p["mask"] == "causal"
            and bool(p["residual"])
            and p.get("window") is None
        ):
            chosen.append(name)
    return chosen


def emergence_settings(config: dict) -> dict:
    """What decides rule emergence's extraction besides the model and the snippets (those of rule extract
    that apply: it runs no position probe)."""
    section = config["extraction"]
    return {key: section[key] for key in ("batch_size", "intermediates_layer", "bootstrap_groups")}


def model_location(config: dict, model: str, results: str | None = None) -> str:
    """Folder (or hub id) the extraction loads `model` from: the trained folder, the GGUF copy, or the spec's."""
    results = results or results_dir(config)
    if is_trained(model):
        return paths.model_dir(model, results)
    spec = config["extraction"]["pretrained"]["models"][model]
    if "gguf" in spec:
        return paths.pretrained_dir(model, results)
    return spec.get("path") or spec["name"]


def variant_params(config: dict, name: str) -> dict:
    """The full parameter set of one simulation variant: defaults, then its overrides."""
    sim = config["simulation"]
    if name not in sim["variants"]:
        raise ConfigError(f"unknown simulation variant {name!r}; known: {sorted(sim['variants'])}")
    return {**(sim.get("defaults") or {}), **(sim["variants"][name] or {})}


def paper_llms_figures(config: dict) -> list[str]:
    """The configured figures target paper_llms draws again: those of the pretrained models' extraction tables
    (FigureSpec.models "pretrained" or "all"; there drawn from the pretrained models alone)."""
    return [figure for figure in config["figures"] if FIGURES[figure].models in ("pretrained", "all")]


def figure_variants(config: dict, figure: str) -> list[str]:
    return list(config["figures"][figure].get("variants", []))


def model_labels(config: dict) -> dict[str, str]:
    """Every extracted model's name in figures (NoPE, RoPE, SmolLM2-135M, ...), by its key."""
    models = config["extraction"]["pretrained"]["models"]
    return model_records.model_labels({key: model_label(spec, key) for key, spec in models.items()})


def plot_options(config: dict, **extra) -> dict:
    """The plot settings and the models' names: what every figure's look depends on besides its own settings."""
    return {**config["plot"], "model_labels": model_labels(config), **extra}


def figure_options(config: dict, figure: str) -> dict:
    """Everything that changes how a figure looks: its own settings and the plot settings."""
    return plot_options(config, **config["figures"][figure])


def seed_runs(config: dict) -> list[tuple[str, int, str]]:
    """(model, seed, run) of every training in the comparison over seeds (target length_seeds): the default run's
    (training.seed, runs "nope" and "rope"), then those of evaluation.seeds ("nope_seed1", ...)."""
    seed = int(config["training"]["seed"])
    runs = [(model, seed, model) for model in TRAINED]
    return runs + [(model, s, seed_run(model, s)) for model in TRAINED for s in extra_seeds(config)]


def training_of(config: dict, run: str) -> dict:
    """The training section of a trained run: the config's, with the run's own seed for a seed run."""
    _, seed = parse_run(run)
    return config["training"] if seed is None else {**config["training"], "seed": seed}


def recursion_variants(config: dict) -> dict:
    """Every simulation variant's parameters (Variant.params(), window included): a changed variant reruns the
    recursion, as it reruns its simulation."""
    return {name: Variant(**variant_params(config, name)).params() for name in config["simulation"]["variants"]}


def pretrained_ablation_settings(config: dict, model: str) -> dict:
    """What of a pretrained model's extraction its pattern ablation shares: its length and sequences. Its batch is
    the model's own batch_size or extraction.batch_size, not extraction.pretrained.batch_size: that one sets the
    extraction's bootstrap groups, which the ablation has none of."""
    settings = extraction_settings(config, model)
    batch = pretrained_spec(config, model).get("batch_size", config["extraction"]["batch_size"])
    return {
        "seq_len": settings["seq_len"],
        "batch_size": batch,
        "splits": settings["splits"],
        "setting": settings["setting"],
    }


def gguf_models(config: dict) -> list[str]:
    """The pretrained models given as GGUF files: rule pretrained converts each to safetensors first."""
    return [m for m, spec in config["extraction"]["pretrained"]["models"].items() if "gguf" in spec]


WINDOW_TEST_TABLES = ("scores", "groups")  # the extraction's tables the window test reads


def window_test_sources(config: dict, results: str) -> dict[str, str]:
    """{pretrained model: the results folder its window test reads}: paper_llms's where its extraction has written
    both tables the test reads (1,000 x 1,024 tokens: queries past Gemma's window), else the default run's. A
    paper_llms run that finishes later changes the rule's input files and params, and Snakemake reruns the test."""
    paper = paths.paper_llms_dir(results)
    return {
        model: paper
        if all(os.path.exists(paths.activation_table(model, t, paper)) for t in WINDOW_TEST_TABLES)
        else results
        for model in pretrained_models(config)
    }


def window_effect_table(config: dict, results: str) -> str:
    """The window test claims 10d-10e read: target window_control's (results/windows/summary) once it has been
    written, else the default run's, which has no lifted arm (its rows then say so). A window_control run that
    finishes later changes the ledger's input files, and Snakemake reruns it."""
    windows = paths.table_file("window_test", paths.windows_root(results))
    return (
        windows
        if window_control_models(config) and os.path.exists(windows)
        else paths.table_file("window_test", results)
    )


def window_test_models(config: dict, results: str) -> dict[str, dict]:
    """Each pretrained model's location and which run's tables its window test reads: the rule's `models` param.
    In target window_control's folder (paths.windows_root): its models, each with its lifted arm beside."""
    if results == paths.windows_root(results_dir(config)):
        location = {m: model_location(config, m) for m in window_control_models(config)}
        return {m: {"location": location[m], "source": "window_control", "lifted": True} for m in location}
    paper = paths.paper_llms_dir(results)
    return {
        model: {
            "location": model_location(config, model, results),
            "source": "paper_llms" if folder == paper else "default run",
            "lifted": False,
        }
        for model, folder in window_test_sources(config, results).items()
    }


def figure_inputs(config: dict, figure: str, results: str, paper_llms: bool = False) -> dict[str, list[str]]:
    """The files a configured figure reads, by table (catalogue.paths.figure_inputs of its record, the models its
    record's `models` stands for in this config); for target paper_llms the pretrained models' alone."""
    options = config["figures"][figure]
    models = {
        "model": [options.get("model", "nope")],
        "trained": list(TRAINED),
        "pretrained": options.get("models") or pretrained_models(config),
        "all": extracted_models(config),
    }.get(FIGURES[figure].models)
    if paper_llms:
        models = [m for m in models or [] if m in pretrained_models(config)]
    return figure_paths.figure_inputs(figure, results, models, figure_variants(config, figure))


PACKAGES = (
    "causalpos",
    "snakemake",
    "torch",
    "transformers",
    "tokenizers",
    "numpy",
    "numba",
    "pandas",
    "pyarrow",
    "matplotlib",
    "seaborn",
)  # the packages whose versions decide the run's numbers and figures


def software_versions() -> dict[str, str]:
    """{name: version} of Python, the platform, PACKAGES and the GPU torch would use (without importing torch)."""
    import platform
    import shutil
    import subprocess
    from importlib import metadata

    versions = {"python": platform.python_version(), "platform": platform.platform()}
    versions |= {name: metadata.version(name) for name in PACKAGES}
    gpu = None
    if shutil.which("nvidia-smi"):
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
        )
        gpu = done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None
    return versions | {"gpu": gpu or "none"}


def config_value(config: dict, key: str):
    """A config value by its dotted key (training.threads)."""
    value = config
    for part in key.split("."):
        value = value[part]
    return value


def job_request(resources: dict, config: dict, rule: str, paper_llms: bool = False) -> dict:
    """What a job of `rule` asks for under `config`, from rules/resources.yaml (`resources`, parsed): threads, mem_mb,
    runtime (minutes) and gpu (how many: its device key decides; "key=cuda" only where it says cuda; `gpus` names
    the key of how many), a job of target paper_llms its own sizes where the entry has them."""
    entry = resources.get(rule, resources["default"])
    threads = entry.get("threads", resources["default"]["threads"])
    wanted = {"threads": config_value(config, threads) if isinstance(threads, str) else threads}
    wanted |= {key: entry.get(key, resources["default"][key]) for key in ("mem_mb", "runtime")}
    if paper_llms:
        wanted |= entry.get("paper_llms", {})
    gpu = 0
    if "gpu" in entry:
        key, _, only = entry["gpu"].partition("=")
        value = config_value(config, key)
        if (value == only) if only else (value != "cpu"):
            gpu = int(config_value(config, entry["gpus"])) if "gpus" in entry else 1
    return wanted | {"gpu": gpu}
