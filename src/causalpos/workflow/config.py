"""Loading and checking a config: the schema, the checks across keys and of this machine, duplicate keys; a bad
config is refused before any job, naming the key. What the config then says each job gets is workflow.settings's."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import jsonschema
import yaml

from causalpos.catalogue.figures import CONFIGURABLE, FIGURES
from causalpos.catalogue.models import is_trained
from causalpos.corpus.documents import check_sources
from causalpos.errors import ConfigError
from causalpos.models.folders import source_problem
from causalpos.models.pretrained import check_gguf, gguf_file, source_kind
from causalpos.models.probe_split import MIN_SEQUENCES as PROBE_MIN_SEQUENCES  # its 60/20/20 split by sequence
from causalpos.models.settings import TrainingSettings, check_warmup, snapshot_schedule, training_settings
from causalpos.simulation.variant import Variant
from causalpos.workflow.settings import extra_seeds, extracted_models, pretrained_settings, results_dir, variant_params

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster, the same values


def read_schema() -> dict:
    """The config schema, parsed (every Snakemake start and every check reads it: libyaml's parser)."""
    return yaml.load(SCHEMA_PATH.read_text(), Loader=YAML_LOADER)


DEVICE_KEYS = ("device", "training.device", "extraction.device")  # every `device` of the schema


def _key_path(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _describe(error: jsonschema.ValidationError, within: tuple = ()) -> str | None:
    """The error in words, naming its key (under `within`: the path of the section validated alone) and, for a
    bound, the key's description (why the bound); None for an error another one already names."""
    where = _key_path([*within, *error.absolute_path])
    schema = error.schema
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        names = schema.get("propertyNames") or {}
        # the removed keys, named by their own error: `not` blocks, alone or under allOf (one per removal)
        refused = [key for block in [names, *names.get("allOf", [])] for key in block.get("not", {}).get("enum", [])]
        extra = sorted(set(error.instance) - set(allowed) - set(refused))
        return f"{where}: unknown key(s) {extra}; allowed keys: {allowed}" if extra else None
    if error.validator == "not" and isinstance(error.validator_value, dict) and "description" in error.validator_value:
        return f"{where}: {error.instance!r} {error.validator_value['description']}"  # a key that was removed
    if error.validator == "enum":
        return f"{where} = {error.instance!r} is not allowed; allowed values: {schema['enum']}"
    if error.validator in (
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "type",
        "minItems",
        "minProperties",
        "uniqueItems",
    ):
        bounds = {
            k: schema[k] for k in ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in schema
        }
        why = f"; {schema['description']}" if "description" in schema else ""
        return f"{where} = {error.instance!r} is invalid ({error.message}); allowed: {bounds}{why}"
    return f"{where}: {error.message}"


def _invalid(errors, within: tuple = ()) -> str:
    """The schema's errors, one line each, sorted by key."""
    lines = (_describe(e, within) for e in sorted(errors, key=lambda e: list(map(str, e.absolute_path))))
    return "\n  ".join(line for line in lines if line is not None)


def validate_config(config: dict, devices=True) -> dict:
    """Validate against the JSON schema with Snakemake's own validator (which also
    fills defaults), then check what a schema cannot say. Raises ConfigError.

    `devices`: the device keys (of DEVICE_KEYS) whose `cuda` this machine must have; True: all,
    False: none (a cluster's head node without a GPU submits jobs that run where there is one,
    and check again there), or a list (a CLI stage: only the key that stage uses)."""
    from snakemake.utils import validate
    from snakemake_interface_common.exceptions import WorkflowError

    check_numbers(config)
    try:
        validate(config, str(SCHEMA_PATH), set_default=True)
    except WorkflowError:
        schema = read_schema()
        validator = jsonschema.validators.validator_for(schema)(schema)
        raise ConfigError("invalid config:\n  " + _invalid(validator.iter_errors(config))) from None
    check_config(config, devices)
    return config


def _whole(checker, instance) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _finite(checker, instance) -> bool:
    return isinstance(instance, (int, float)) and not isinstance(instance, bool) and math.isfinite(instance)


def check_numbers(config: dict) -> None:
    """Refuse what JSON Schema lets through: NaN and infinity pass every bound (a comparison with NaN is false), and
    a whole number written as a float (`d: 64.0`) is an integer to it. Raises ConfigError naming each key."""
    schema = read_schema()
    base = jsonschema.validators.validator_for(schema)
    strict = jsonschema.validators.extend(
        base, type_checker=base.TYPE_CHECKER.redefine_many({"integer": _whole, "number": _finite})
    )(schema)
    errors = [
        e
        for e in strict.iter_errors(config)
        if e.validator in ("type", "anyOf", "oneOf")
        and isinstance(e.instance, float)
        and (not math.isfinite(e.instance) or e.instance.is_integer())  # 2.5 for an integer: the schema's own error
    ]
    if errors:
        lines = []
        for error in sorted(errors, key=lambda e: list(map(str, e.absolute_path))):
            where = _key_path(error.absolute_path)
            if not math.isfinite(error.instance):
                lines.append(f"{where} = {error.instance!r} is not a finite number")
            else:
                lines.append(f"{where} = {error.instance!r} must be a whole number, written without a decimal point")
        raise ConfigError("invalid config:\n  " + "\n  ".join(dict.fromkeys(lines)))


def with_defaults(config: dict) -> dict:
    """A copy of `config` with the schema's defaults filled in and checked by jsonschema alone, without
    Snakemake's validator and without check_config's machine checks: for scripts on machines where the package
    runs but Snakemake is not installed (bench/device_length_seeds.py on a GPU node). Raises ConfigError."""
    schema = read_schema()
    validator = _filling_validator(jsonschema.validators.validator_for(schema), schema)
    config = copy.deepcopy(config)
    errors = list(validator.iter_errors(config))
    if errors:
        raise ConfigError("invalid config:\n  " + _invalid(errors))
    return config


def training_defaults(section: dict | None = None) -> TrainingSettings:
    """A training section as a config would write it (None: empty) with the schema's defaults filled in, checked:
    the settings of a training outside a config file (tests, bench/). A config's own section is
    config["training"] once validate_config has filled it in. Raises ConfigError naming the key."""
    schema = read_schema()
    validator = _filling_validator(jsonschema.validators.validator_for(schema), schema["properties"]["training"])
    section = copy.deepcopy(section or {})
    errors = list(validator.iter_errors(section))
    if errors:
        raise ConfigError("invalid training settings:\n  " + _invalid(errors, ("training",)))
    try:
        return training_settings(section)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _filling_validator(base, schema: dict):
    """A validator of `schema` (a `base` validator class's) that fills in its defaults as it goes, as Snakemake's
    validate does: a section left out gets its default {} and then the defaults of its keys; each a copy."""
    check_properties = base.VALIDATORS["properties"]

    def properties(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for key, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(key, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(base, {"properties": properties})(schema)


def check_results_folder(config: dict) -> None:
    """`results` names a folder to write under: not a file, nor a folder under a file."""
    results = Path(results_dir(config))
    for folder in (results, *results.parents):
        if folder.exists() and not folder.is_dir():
            where = "is" if folder == results else f"lies under {folder}, which is"
            raise ConfigError(
                f"results = {str(results)!r} {where} a file; results names the folder every result goes under"
            )


def check_config(config: dict, devices=True) -> None:
    check_results_folder(config)
    try:
        training = training_settings(config["training"])  # complete: the schema's defaults are filled in
        check_warmup(training)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    block_len, context = config["tokenizer"]["block_len"], training["model"]["context"]
    if block_len > context:
        raise ConfigError(f"tokenizer.block_len = {block_len} exceeds training.model.context = {context}")
    longest = max(config["evaluation"]["length_factors"]) * block_len
    if longest > context:
        raise ConfigError(
            f"evaluation.length_factors: {max(config['evaluation']['length_factors'])} x "
            f"tokenizer.block_len = {longest} tokens exceeds training.model.context = {context}"
        )
    snippet_len = config["evaluation"]["snippet_len"]
    if snippet_len > context:  # the extraction runs the trained models on the snippets
        raise ConfigError(
            f"evaluation.snippet_len = {snippet_len} exceeds training.model.context = {context}: "
            f"the extraction runs the trained models on the snippets; set it <= {context}"
        )
    try:
        check_sources(config["data"]["sources"])
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if config["tokenizer"]["name"] is not None:  # a folder holding a tokenizer, or a Hub id (offline: cached)
        problem = source_problem("tokenizer.name", config["tokenizer"]["name"], "tokenizer")
        if problem:
            raise ConfigError(problem)
    check_extraction(config, training)
    check_snapshots_and_seeds(config, training)
    check_figure_lists(config)
    check_colormaps(config)
    check_devices(config, training, DEVICE_KEYS if devices is True else devices or ())
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
            raise ConfigError(
                f"figures.{figure}.variants: {unknown} not in simulation.variants (known: {sorted(variants)})"
            )


def check_extraction(config: dict, training: dict) -> None:
    extraction = config["extraction"]
    models = extraction["pretrained"]["models"]
    for name, spec in models.items():
        if is_trained(name):
            raise ConfigError(
                f"extraction.pretrained.models.{name}: {name!r} is the name of a trained model (or of "
                f"one of its seed runs); choose another"
            )
        try:
            source_kind(spec, f"extraction.pretrained.models.{name}")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        for key in ("path", "name"):  # config.json, weights and a tokenizer; a Hub id offline: in the local cache
            if key in spec and (
                problem := source_problem(
                    f"extraction.pretrained.models.{name}.{key}", spec[key], "model", hub=key == "name"
                )
            ):
                raise ConfigError(problem)
        if "gguf" in spec:
            check_gguf_model(config, name)
    check_probe(config)
    layer, n_layers = extraction["intermediates_layer"], training["model"]["n_layers"]
    if layer > n_layers - 2:
        raise ConfigError(
            f"extraction.intermediates_layer = {layer} is out of range: Figure 3 needs layer l and "
            f"l + 1 of the trained models (training.model.n_layers = {n_layers}), so l <= {n_layers - 2}"
        )
    known = extracted_models(config)
    for figure, spec in config["figures"].items():
        if "model" in spec and spec["model"] not in known:
            raise ConfigError(f"figures.{figure}.model = {spec['model']!r} is not an extracted model (known: {known})")
        unknown = [m for m in spec.get("models", []) if m not in models]
        if unknown:
            raise ConfigError(
                f"figures.{figure}.models: {unknown} not in extraction.pretrained.models (known: {sorted(models)})"
            )
        if figure == "fig05_llms" and not models:
            raise ConfigError(
                "figures.fig05_llms: name at least one model under extraction.pretrained.models (or drop the figure)"
            )


def check_snapshots_and_seeds(config: dict, training: dict) -> None:
    """The emergence figure needs snapshots; the length comparison's seeds differ from training.seed."""
    if "figE1_emergence" in config["figures"] and len(snapshot_schedule(training)) < 2:
        raise ConfigError(
            f"figures.figE1_emergence needs snapshots along training: training.snapshot_steps = "
            f"{training['snapshot_steps']!r} gives fewer than 2; set it to 2 or more (or drop the figure)"
        )
    seeds = extra_seeds(config)
    if training["seed"] in seeds:
        raise ConfigError(
            f"evaluation.seeds = {seeds} includes training.seed = {training['seed']}, the default run's "
            f"own training; list only other seeds"
        )


def check_gguf_model(config: dict, name: str) -> None:
    """A GGUF model's file is whole, and the extraction's sequence length and layer fit the model."""
    setting = f"extraction.pretrained.models.{name}"
    try:
        path = gguf_file(config["extraction"]["pretrained"]["models"][name], setting)
        model = check_gguf(path, f"{setting}.gguf")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    spec, settings = config["extraction"]["pretrained"]["models"][name], pretrained_settings(config, name)
    seq_key = f"{setting}.seq_len" if "seq_len" in spec else "extraction.pretrained.seq_len"
    if model["context"] is not None and settings["seq_len"] > model["context"]:
        raise ConfigError(
            f"{seq_key} = {settings['seq_len']} exceeds the context of {name} "
            f"({model['architecture']}.context_length = {model['context']} in {path}); "
            f"set it <= {model['context']}"
        )
    layer = config["extraction"]["intermediates_layer"]
    if model["layers"] is not None and layer > model["layers"] - 2:
        raise ConfigError(
            f"extraction.intermediates_layer = {layer} is out of range for {name} "
            f"({model['layers']} layers in {path}): Figure 3 needs layer l and l + 1, "
            f"so l <= {model['layers'] - 2}"
        )


def check_probe(config: dict) -> None:
    """The position probe splits its sequences 60/20/20 by sequence: it needs at least 5 of them."""
    extraction = config["extraction"]
    wanted = extraction["probe_sequences"]
    if wanted == 0:
        return
    if wanted < PROBE_MIN_SEQUENCES:
        raise ConfigError(
            f"extraction.probe_sequences = {wanted}: the position probe needs at least "
            f"{PROBE_MIN_SEQUENCES} sequences; set 0 (no probe) or >= {PROBE_MIN_SEQUENCES}"
        )
    have = {"evaluation.n_snippets": config["evaluation"]["n_snippets"]}  # the trained models' sequences
    for name, spec in extraction["pretrained"]["models"].items():
        key = (
            f"extraction.pretrained.models.{name}.n_sequences"
            if "n_sequences" in spec
            else "extraction.pretrained.n_sequences"
        )
        have[key] = pretrained_settings(config, name)["n_sequences"]
    if extraction["pretrained"]["models"]:
        have["extraction.paper_llms.n_sequences"] = extraction["paper_llms"]["n_sequences"]
    for key, count in have.items():
        if count < PROBE_MIN_SEQUENCES:
            raise ConfigError(
                f"{key} = {count} leaves the position probe fewer than {PROBE_MIN_SEQUENCES} "
                f"sequences; set it >= {PROBE_MIN_SEQUENCES} or extraction.probe_sequences: 0"
            )


def check_figure_lists(config: dict) -> None:
    """A name twice in a figure's list would draw the same panel twice."""
    for figure, spec in config["figures"].items():
        for key in ("variants", "models"):
            listed = spec.get(key, [])
            twice = sorted({v for v in listed if listed.count(v) > 1})
            if twice:
                raise ConfigError(f"figures.{figure}.{key}: {twice} listed more than once; list each once")


# Colour maps that every supported matplotlib (>= 3.8) and seaborn (>= 0.13) has: a config naming these
# needs no import of matplotlib (a fifth of a second at every start of Snakemake) to be checked.
KNOWN_COLORMAPS = frozenset(
    {
        "viridis",
        "magma",
        "inferno",
        "plasma",
        "cividis",
        "coolwarm",
        "RdBu_r",
        "RdBu",
        "bwr",
        "seismic",
        "Greys",
        "rocket",
        "mako",
        "vlag",
        "icefire",
    }
)


def check_colormaps(config: dict) -> None:
    """plot.cmap and plot.diverging_cmap must be colour maps the figures can draw with, not a KeyError
    at figure time. matplotlib is imported only here; seaborn, which the figure code imports and which
    registers its own maps (rocket, mako, vlag, ...), only for a name matplotlib lacks."""
    names = {key: config["plot"][key] for key in ("cmap", "diverging_cmap")}
    if set(names.values()) <= KNOWN_COLORMAPS:
        return
    import matplotlib

    for key, name in names.items():
        if name in matplotlib.colormaps:
            continue
        import seaborn  # noqa: F401  (registers its colour maps with matplotlib)

        if name not in matplotlib.colormaps:
            raise ConfigError(
                f"plot.{key} = {name!r} is not a colour map; use one of matplotlib's "
                f"(e.g. viridis, magma, coolwarm, RdBu_r; list: matplotlib.colormaps) "
                f"or seaborn's (rocket, mako, vlag, icefire)"
            )


def check_devices(config: dict, training: dict, keys=DEVICE_KEYS) -> None:
    """`cuda` under `keys` needs CUDA here. torch (seconds to import) is imported only when one asks for it."""
    values = {
        "device": config["device"],
        "training.device": training["device"],
        "extraction.device": config["extraction"]["device"],
    }
    asked = [key for key in keys if values[key] not in ("auto", "cpu")]
    if not asked:
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"{asked[0]} = {values[asked[0]]} but no CUDA device is available on this machine; "
            f"set {asked[0]}: auto (CUDA when present) or cpu"
        )


def check_duplicate_keys(path) -> None:
    """Refuse a YAML file that gives a key twice in one mapping, which YAML loaders resolve silently
    by keeping the last (a variant given twice ran with the second's settings). Reads the file again:
    the loaded config no longer shows it. ConfigError names the file, the key path and both lines."""
    path = Path(path)
    loader = YAML_LOADER
    text = config_text(path)
    try:
        root = yaml.compose(text, Loader=loader)
        yaml.load(text, Loader=loader)  # a tag no safe loader constructs (!!python/object) fails here, not later
    except yaml.YAMLError as err:
        raise ConfigError(yaml_problem(path, text, err)) from None
    if root is not None and not isinstance(root, yaml.MappingNode):
        kind = "a list" if isinstance(root, yaml.SequenceNode) else "a single value"
        raise ConfigError(
            f"config file {path}, line {root.start_mark.line + 1}: its top level is {kind}; a config maps keys "
            f"(data:, training:, ...) to their settings"
        )
    _find_duplicate_keys(root, [], path)


def config_text(path) -> str:
    """The text of a config file, or a one-line ConfigError naming it: missing, a folder, unreadable, not text."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {path} is a folder; name a YAML file (e.g. config.yaml)")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"config file {path} is not a text file (byte {err.object[err.start]:#04x} at offset "
            f"{err.start} is not UTF-8); a config is a YAML text file such as config.yaml"
        ) from None
    except OSError as err:
        raise ConfigError(f"config file {path} cannot be read ({err.strerror})") from None


def yaml_problem(path, text: str, err: yaml.YAMLError) -> str:
    """A YAML parser's error in one line: the file, the line and column, what is wrong (a tab, most often)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if mark is None:
        return f"config file {path} is not valid YAML: {problem}"
    line = text.splitlines()[mark.line] if mark.line < len(text.splitlines()) else ""
    hint = "; YAML indents with spaces, never tabs" if "\t" in line else ""
    return f"config file {path}, line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {problem}{hint}"


def _find_duplicate_keys(node, where: list, path: Path) -> None:
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _find_duplicate_keys(item, where + [index], path)
    elif isinstance(node, yaml.MappingNode):
        first_line = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name is not None and name in first_line:
                raise ConfigError(
                    f"config file {path}: key {_key_path(where + [name])} is given twice "
                    f"(lines {first_line[name]} and {key.start_mark.line + 1}); YAML keeps only "
                    f"the last: remove or rename one"
                )
            if name is not None:
                first_line[name] = key.start_mark.line + 1
            _find_duplicate_keys(value, where + [name], path)


def load_config(path, devices=True) -> dict:
    """Read, check (duplicate keys, then validate_config; `devices` as there) and fill in a config file."""
    path = Path(path)
    check_duplicate_keys(path)  # also: a missing file, a folder, not text, not YAML
    config = yaml.load(config_text(path), Loader=YAML_LOADER) or {}
    if not isinstance(config, dict):
        raise ConfigError(
            f"config file {path}: its top level is a {type(config).__name__}; a config maps keys "
            f"(data:, training:, ...) to their settings"
        )
    return validate_config(config, devices)
