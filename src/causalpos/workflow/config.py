"""Loading and checking config.yaml: one place for the workflow and the CLI."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from causalpos.figures.registry import CONFIGURABLE, FIGURES
from causalpos.models.pretrained import source_kind
from causalpos.models.settings import training_settings
from causalpos.simulation.variant import Variant
from causalpos.workflow import paths

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
MODELS = ("nope", "rope")  # the NoPE decoder and its RoPE twin (Section 4.2)


class ConfigError(ValueError):
    """A config value is wrong; the message names the key and what is allowed."""


def _key_path(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    where = _key_path(error.absolute_path)
    schema = error.schema
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return f"{where}: unknown key(s) {extra}; allowed keys: {allowed}"
    if error.validator == "enum":
        return f"{where} = {error.instance!r} is not allowed; allowed values: {schema['enum']}"
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "type",
                           "minItems", "minProperties", "uniqueItems"):
        bounds = {k: schema[k] for k in ("type", "minimum", "maximum", "exclusiveMinimum",
                                          "exclusiveMaximum") if k in schema}
        return f"{where} = {error.instance!r} is invalid ({error.message}); allowed: {bounds}"
    return f"{where}: {error.message}"


def validate_config(config: dict) -> dict:
    """Validate against the JSON schema with Snakemake's own validator (which also
    fills defaults), then check what a schema cannot say. Raises ConfigError."""
    from snakemake.utils import validate
    from snakemake_interface_common.exceptions import WorkflowError

    try:
        validate(config, str(SCHEMA_PATH), set_default=True)
    except WorkflowError:
        schema = yaml.safe_load(SCHEMA_PATH.read_text())
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
        raise ConfigError("invalid config:\n  " + "\n  ".join(_describe(e) for e in errors)) from None
    check_config(config)
    return config


def check_config(config: dict) -> None:
    try:
        training = training_settings(config.get("training") or {})  # the model's shape too
    except ValueError as err:
        raise ConfigError(str(err)) from None
    block_len, context = config["tokenizer"]["block_len"], training["model"]["context"]
    if block_len > context:
        raise ConfigError(f"tokenizer.block_len = {block_len} exceeds training.model.context = {context}")
    longest = max(config["evaluation"]["length_factors"]) * block_len
    if longest > context:
        raise ConfigError(f"evaluation.length_factors: {max(config['evaluation']['length_factors'])} x "
                          f"tokenizer.block_len = {longest} tokens exceeds training.model.context = {context}")
    check_extraction(config, training)
    variants = config["simulation"]["variants"]
    for name in variants:
        try:
            Variant(**variant_params(config, name))
        except ValueError as err:
            raise ConfigError(f"simulation.variants.{name}: {err}") from None
    for figure, spec in config["figures"].items():
        if figure not in CONFIGURABLE:
            raise ConfigError(f"figures.{figure}: unknown figure; known: {list(CONFIGURABLE)}")
        listed = spec.get("variants", [])
        if not FIGURES[figure].uses_variants and listed:
            raise ConfigError(f"figures.{figure}.variants: this figure uses no simulation variant")
        if FIGURES[figure].uses_variants and not listed:
            raise ConfigError(f"figures.{figure}.variants: name at least one simulation variant")
        unknown = [v for v in listed if v not in variants]
        if unknown:
            raise ConfigError(f"figures.{figure}.variants: {unknown} not in simulation.variants "
                              f"(known: {sorted(variants)})")


def pretrained_models(config: dict) -> list[str]:
    return list(config["extraction"]["pretrained"]["models"])


def extracted_models(config: dict) -> list[str]:
    """Every model the extraction stage analyses: the trained twins, then the pretrained LLMs."""
    return list(MODELS) + pretrained_models(config)


def pretrained_settings(config: dict, name: str) -> dict:
    """One pretrained model's source (gguf / path / name) and its sizes, defaults filled in."""
    section = config["extraction"]["pretrained"]
    spec = dict(section["models"][name])
    return {"seq_len": section["seq_len"], "n_sequences": section["n_sequences"],
            "batch_size": config["extraction"]["batch_size"], **spec}


def extraction_settings(config: dict, model: str) -> dict:
    """Everything that decides one model's extraction tables (the rule's params: a change reruns that model)."""
    section = config["extraction"]
    common = {key: section[key] for key in ("intermediates_layer", "probe_sequences", "probe_positions",
                                            "bootstrap_groups")}
    if model in MODELS:
        return {"kind": "trained", "batch_size": section["batch_size"], **common}
    return {"kind": "pretrained", **pretrained_settings(config, model), **common}


def model_location(config: dict, model: str, results: str = paths.RESULTS) -> str:
    """Folder (or hub id) the extraction loads `model` from: the trained folder, the GGUF copy, or the spec's."""
    if model in MODELS:
        return paths.model_dir(model, results)
    spec = config["extraction"]["pretrained"]["models"][model]
    if "gguf" in spec:
        return paths.pretrained_dir(model, results)
    return spec.get("path") or spec["name"]


def check_extraction(config: dict, training: dict) -> None:
    extraction = config["extraction"]
    models = extraction["pretrained"]["models"]
    for name, spec in models.items():
        if name in MODELS:
            raise ConfigError(f"extraction.pretrained.models.{name}: {name!r} is the name of a trained model; "
                              f"choose another")
        try:
            source_kind(spec, f"extraction.pretrained.models.{name}")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if "path" in spec and not Path(spec["path"]).is_dir():
            raise ConfigError(f"extraction.pretrained.models.{name}.path: folder {spec['path']} does not exist")
        if spec.get("gguf", "embedded") != "embedded" and not Path(spec["gguf"]).is_file():
            raise ConfigError(f"extraction.pretrained.models.{name}.gguf: file {spec['gguf']} does not exist")
    layer, n_layers = extraction["intermediates_layer"], training["model"]["n_layers"]
    if layer > n_layers - 2:
        raise ConfigError(f"extraction.intermediates_layer = {layer} is out of range: Figure 3 needs layer l and "
                          f"l + 1 of the trained models (training.model.n_layers = {n_layers}), so l <= {n_layers - 2}")
    known = extracted_models(config)
    for figure, spec in config["figures"].items():
        if "model" in spec and spec["model"] not in known:
            raise ConfigError(f"figures.{figure}.model = {spec['model']!r} is not an extracted model (known: {known})")
        unknown = [m for m in spec.get("models", []) if m not in models]
        if unknown:
            raise ConfigError(f"figures.{figure}.models: {unknown} not in extraction.pretrained.models "
                              f"(known: {sorted(models)})")
        if figure == "fig05_llms" and not models:
            raise ConfigError("figures.fig05_llms: name at least one model under extraction.pretrained.models "
                              "(or drop the figure)")


def load_config(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    with path.open() as fh:
        config = yaml.safe_load(fh) or {}
    return validate_config(config)


def variant_params(config: dict, name: str) -> dict:
    """The full parameter set of one simulation variant: defaults, then its overrides."""
    sim = config["simulation"]
    if name not in sim["variants"]:
        raise ConfigError(f"unknown simulation variant {name!r}; known: {sorted(sim['variants'])}")
    return {**(sim.get("defaults") or {}), **(sim["variants"][name] or {})}


def figure_inputs(config: dict, figure: str, results: str = paths.RESULTS) -> dict[str, list[str]]:
    """The Parquet (and JSON) files a figure is drawn from, by table name; the rule and the CLI share it."""
    spec = FIGURES[figure]
    options = config["figures"].get(figure, {})
    chosen = {"model": [options.get("model", "nope")], "trained": list(MODELS),
              "pretrained": options.get("models") or pretrained_models(config),
              "all": extracted_models(config)}.get(spec.models, [])
    reads = set(spec.tables)
    return {
        "simulation": [paths.simulation_table(v, results) for v in figure_variants(config, figure)],
        "theory": [paths.theory_table(results)] if "theory" in reads else [],
        "metrics": [paths.model_file(m, "metrics.parquet", results) for m in MODELS] if "metrics" in reads else [],
        "blocks": [paths.tokens_file("blocks.json", results)] if "blocks" in reads else [],
        "length_eval": [paths.model_file(m, "length_eval.parquet", results) for m in MODELS]
        if "length_eval" in reads else [],
        **{table: [paths.activation_table(m, table, results) for m in chosen] if table in reads else []
           for table in ("scores", "intermediates", "probe")},
    }


def claims_inputs(config: dict, results: str = paths.RESULTS) -> dict[str, list[str]]:
    """Every Parquet result the claims ledger reads; the rule and the CLI share it."""
    models = extracted_models(config)
    return {
        "simulations": [paths.simulation_table(v, results) for v in config["simulation"]["variants"]],
        "theory": [paths.theory_table(results)],
        **{table: [paths.activation_table(m, table, results) for m in models]
           for table in ("scores", "intermediates", "groups")},
    }


def figure_variants(config: dict, figure: str) -> list[str]:
    return list(config["figures"][figure].get("variants", []))


def figure_options(config: dict, figure: str) -> dict:
    """Everything that changes how a figure looks: its own settings and the plot settings."""
    return {**config["plot"], **config["figures"][figure]}
