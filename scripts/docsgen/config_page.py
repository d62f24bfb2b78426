"""docs/configuration.md's key tables, from the config schema (section `config`).

Every key of src/causalpos/schemas/config.schema.yaml gets a row: the values the schema allows, the value used
when the key is left out (the schema's default; for the variant parameters those of
causalpos.simulation.variant.Variant), the value in the default config.yaml, and what it means (the text below,
else the schema's description). The thresholds' table is the section `thresholds` (catalogue_pages.py).
"""

from __future__ import annotations

from dataclasses import fields

import yaml

from causalpos.catalogue.columns import VARIANT_COLUMNS
from causalpos.models.settings import snapshot_schedule
from causalpos.workflow.config import training_defaults
from docsgen import ROOT, row, section, table

PAGE = "docs/configuration.md"
TRAINING = training_defaults()  # the schema's training defaults: the default snapshot schedule below
SCHEMA = ROOT / "src" / "causalpos" / "schemas" / "config.schema.yaml"
CONFIG = ROOT / "config.yaml"

# What a key means, where the schema's one-line description says less. Keys not here use the schema's text.
MEANINGS = {
    "device": "`auto` (CUDA if present), `cpu` or `cuda`: where the Monte Carlo runs",
    "theory.seq_len": "tokens of the closed forms to tabulate",
    "theory.alphas": "the alphas whose closed forms g, h, g', h' and layer-2 scores (Eq. 4) are tabulated",
    "simulation.threads": "threads per simulation job (capped by `--cores` and the job's CPUs)",
    "simulation.chunk_size": "samples per streamed chunk; memory depends on it, the numbers do not",
    "simulation.defaults": "the variant parameters (table below) every variant starts from",
    "simulation.variants.NAME": "overrides of the defaults; NAME is the wildcard and the file name "
    "(`results/simulation/NAME.parquet`)",
    "data.sources": "the corpora, a list of sources (table below): `{type: embedded, name}`, "
    "`{type: files, paths, text_column}` (.txt .jsonl .parquet), "
    "`{type: hf, name or path, config, split}` (streamed)",
    "data.heldout_fraction": "share of documents held out; the split is a seeded hash of each text, so adding "
    "documents never moves one between train and held-out",
    "data.seed": "seed of that hash",
    "tokenizer.name": "null trains a byte-level BPE on the train split; else a tokenizer folder or hub name",
    "tokenizer.block_len": "tokens per training block (EOS between documents)",
    "evaluation.snippet_len": "Section 4.2's snippets: the first tokens of held-out documents",
    "evaluation.n_snippets": "how many snippets",
    "train_processes": "> 1: the train job runs itself under torchrun (DDP, NCCL on GPU, gloo on CPU)",
    "training.steps": "optimizer steps",
    "training.snapshot_steps": "weight-only snapshots for rule emergence: n gives step 0, the last and n - 2 "
    "log-spaced steps between (the default {}: {}); a list gives those "
    "steps and 0 and the last; 0 none (then no figE1_emergence)".format(
        TRAINING["snapshot_steps"], ", ".join(map(str, snapshot_schedule(TRAINING)))
    ),
    "evaluation.seeds": "other training seeds for the length comparison over seeds: target `length_seeds` trains "
    "nope and rope again with each (not part of `all`); must differ from `training.seed`",
    "results": "the folder every result goes to; a config with a folder of its own "
    "(`config/nope-large.yaml`: results/nope-large) runs beside the default run, its logs and "
    "benchmarks inside that folder too",
    "training.micro_batch": "sequences (blocks) per forward/backward, per process",
    "training.grad_accum": "micro batches per optimizer step; global batch = micro_batch x grad_accum x processes",
    "training.lr": "peak learning rate, reached at the end of the linear warmup",
    "training.min_lr": "the cosine schedule ends here at `steps`",
    "training.warmup_steps": "linear warmup steps",
    "training.weight_decay": "AdamW weight decay, on matrices and embeddings (not norms)",
    "training.betas": "AdamW betas",
    "training.grad_clip": "max global gradient norm; 0 disables clipping",
    "training.seed": "model initialisation, data order and every RNG",
    "training.eval_every": "held-out loss every this many steps (and at 0 and the end); 0 = never",
    "training.eval_batches": "micro batches of held-out blocks per evaluation",
    "training.checkpoint_every": "steps between checkpoints (a killed run resumes from the last); 0 = only at the end",
    "training.log_every": "steps per metrics row and log line",
    "training.device": "`auto`, `cpu` or `cuda`",
    "training.threads": "threads per training job (rule train, every seed; capped by `--cores` and the job's "
    "CPUs), shared by its processes on a node: each of `train_processes` takes threads / "
    "processes, at least 1",
    "training.model.n_layers": "decoder layers (the shape is checked before any job: heads must divide hidden, ...)",
    "training.model.hidden_size": "hidden size",
    "training.model.n_heads": "attention heads (must divide hidden_size)",
    "training.model.n_kv_heads": "key-value heads, grouped-query attention (must divide n_heads)",
    "training.model.head_dim": "hidden_size / n_heads, even (RoPE rotates pairs)",
    "training.model.intermediate_size": "SwiGLU MLP width",
    "training.model.context": "max positions; room for the length evaluation at 4x the block length",
    "training.model.rope_theta": "RoPE base of the `rope` model",
    "training.model.tie_word_embeddings": "the output layer shares the embedding matrix",
    "extraction.device": "`auto`, `cpu` or `cuda`",
    "extraction.batch_size": "sequences per forward pass",
    "extraction.threads": "threads per extraction job (rules extract, pattern_ablation, pattern_ablation_pretrained and emergence; capped by "
    "`--cores` and the job's CPUs)",
    "extraction.pretrained.seq_len": "tokens per sequence of the pretrained LLMs (the paper: 1,024)",
    "extraction.pretrained.n_sequences": "held-out sequences per pretrained LLM (the paper: 1,000)",
    "extraction.pretrained.models.NAME": "a pretrained LLM (table below); NAME is the `{model}` wildcard",
    "claims.thresholds.KEY": "overrides of the ledger's thresholds, key by key (table below; docs/claims.md)",
    "figures.FIGURE": "settings of one figure of causalpos.catalogue.figures (table below); the key list is the "
    "figures the run draws",
    "plot.formats": "one file per format and figure",
    "plot.dpi": "resolution of the PNG (and SVG) files",
    "tokenizer.vocab_size": "vocabulary of the trained BPE (unused when `name` is set)",
    "claims.seed": "seed of the replicates and of the bootstrap",
    "data.sources.text_column": "files and hf sources: the column or field that holds the text (default `text`)",
    "data.sources.config": "hf source: the dataset's configuration (e.g. `sample-10BT`)",
    "data.sources.split": "hf source: the split to stream",
    "data.sources.data_files": "hf source: passed to `datasets.load_dataset` as `data_files`",
    "data.sources.max_documents": "cap of documents of this source (overrides `data.max_documents`)",
    "pretrained.seq_len": "this model's own `extraction.pretrained.seq_len`",
    "pretrained.n_sequences": "this model's own `extraction.pretrained.n_sequences`",
    "pretrained.batch_size": "this model's own `extraction.batch_size`",
    "plot.cmap": "colour map of every score heatmap, raw and diagonal-normalised (the paper's `rocket`)",
    "plot.diverging_cmap": "centred colour map of differences (figC1), and of diagonal-normalised maps with "
    "`centred_diagnorm` (ours)",
    "plot.colour_limits": "`paper`: raw simulated scores on the paper's fixed range, 0 to a token's score with itself "
    "(1 for l2 and LayerNorm with d scaling, sqrt(d) with sqrt(d) scaling), every other panel on "
    "its own range; `panel`: every panel on its own range",
    "plot.centred_diagnorm": "diagonal-normalised maps on limits symmetric about 0 in `diverging_cmap` (ours) instead "
    "of the paper's own range in `cmap`",
    "pretrained.label": "the model's name in figures (default: the embedded model's name, the Hugging Face id's last "
    "part, else its key)",
    "plot.font_scale": "multiplies every font size",
    # figures.FIGURE
    "figures.variants": "which variants the figure shows (rows in that order)",
    "figures.alpha": "alpha of the Figure 1 sketch (fig01_mechanism)",
    "figures.model": "which extracted model fig03_intermediates and fig08_model_layers show",
    "figures.models": "rows of fig05_llms (default: every pretrained model)",
}
# the variant parameters are the simulation tables' columns too: their meanings are the catalogue's (sampler's the
# schema's, which says more about the setting than the column's)
MEANINGS.update({f"variant.{key}": meaning for key, meaning in VARIANT_COLUMNS.items() if key != "sampler"})


def fmt(value) -> str:
    """A value as YAML writes it in a flow: true, null, [1, 2, 4], {gguf: embedded}."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def allowed(node: dict) -> str:
    """The values the schema allows, in words."""
    if "enum" in node:
        return " \\| ".join(f"`{fmt(v)}`" for v in node["enum"])
    if "anyOf" in node:
        return " or ".join(allowed(n) for n in node["anyOf"])
    kind = node.get("type", "")
    kinds = kind if isinstance(kind, list) else [kind]
    words = []
    for k in kinds:
        if k in ("integer", "number"):
            bounds = []
            if "minimum" in node:
                bounds.append(f">= {fmt(node['minimum'])}")
            if "exclusiveMinimum" in node:
                bounds.append(f"> {fmt(node['exclusiveMinimum'])}")
            if "maximum" in node:
                bounds.append(f"<= {fmt(node['maximum'])}")
            if "exclusiveMaximum" in node:
                bounds.append(f"< {fmt(node['exclusiveMaximum'])}")
            words.append(" ".join([k] + [", ".join(bounds)] if bounds else [k]))
        elif k == "array":
            items = node.get("items", {})
            items = "mapping" if "$ref" in items else allowed(items) or "value"
            size = []
            if node.get("minItems") and node.get("minItems") == node.get("maxItems"):
                size.append(f"exactly {node['minItems']}")
            elif node.get("minItems"):
                size.append(f"at least {node['minItems']}")
            if node.get("uniqueItems"):
                size.append("unique")
            words.append(f"list of {items}" + (f" ({', '.join(size)})" if size else ""))
        elif k == "boolean":
            words.append("`true` \\| `false`")
        elif k == "null":
            words.append("`null`")
        elif k:
            words.append(k)
    return " or ".join(words)


def resolve(node: dict, schema: dict) -> dict:
    ref = node.get("$ref")
    return schema["$defs"][ref.rsplit("/", 1)[1]] if ref else node


ABSENT = object()


def lookup(config: dict, path: str):
    value = config
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return ABSENT
        value = value[part]
    return value


def main_rows(schema: dict, config: dict) -> list[str]:
    lines = []

    def walk(properties: dict, required: list, prefix: str):
        for name, raw in properties.items():
            node, path = resolve(raw, schema), prefix + name
            if "properties" in node and raw.get("$ref") is None:  # a section: its keys
                walk(node["properties"], node.get("required", []), path + ".")
                continue
            in_config = lookup(config, path)
            if path == "simulation.defaults":
                shown, default = "", "required"
            elif path == "simulation.variants":
                path, shown, default = "simulation.variants.NAME", f"{len(in_config)} variants", "required"
            elif path == "data.sources":
                shown, default = ", ".join(s.get("name", s["type"]) for s in in_config), "required"
            elif path == "figures":
                path, shown, default = "figures.FIGURE", f"{len(in_config)} figures", "required"
            elif path == "extraction.pretrained.models":
                path, default = "extraction.pretrained.models.NAME", fmt(node.get("default"))
                shown = ", ".join(f"{k}: {fmt(v)}" for k, v in in_config.items())
            elif path == "claims.thresholds":
                path, default, shown = "claims.thresholds.KEY", "see below", ""
            else:
                shown = "" if in_config is ABSENT else fmt(in_config)
                if "default" in node:
                    default = fmt(node["default"])
                else:
                    default = "required" if name in required else ""
            kinds = (
                "mapping"
                if path.endswith((".NAME", ".FIGURE", ".KEY")) or path == "simulation.defaults"
                else allowed(node)
            )
            meaning = MEANINGS.get(path) or node.get("description", "")
            lines.append(
                row(
                    [
                        f"`{path}`",
                        kinds,
                        f"`{default}`" if default not in ("", "required", "see below") else default,
                        f"`{shown}`" if shown else "",
                        meaning,
                    ]
                )
            )

    walk(schema["properties"], schema.get("required", []), "")
    return lines


def def_rows(schema: dict, name: str, prefix: str, defaults: dict | None = None, shown: dict | None = None):
    node = schema["$defs"][name]
    lines = []
    for key, raw in node["properties"].items():
        cells = [f"`{key}`", allowed(raw)]
        if defaults is not None:
            cells.append(f"`{fmt(defaults[key])}`" if key in defaults else "")
        if shown is not None:
            cells.append(f"`{fmt(shown[key])}`" if key in shown else "")
        cells.append(MEANINGS.get(prefix + key) or raw.get("description", ""))
        lines.append(row(cells))
    return lines


@section("config", PAGE)
def config_tables() -> str:
    """Every key, then the fields of the variants, data sources, pretrained models and figures."""
    from causalpos.simulation.variant import Variant

    schema = yaml.safe_load(SCHEMA.read_text())
    config = yaml.safe_load(CONFIG.read_text())
    variant_defaults = {f.name: f.default for f in fields(Variant)}
    missing = set(variant_defaults) ^ set(schema["$defs"]["variant_fields"]["properties"])
    if missing:
        raise ValueError(f"the schema's variant_fields and Variant differ: {sorted(missing)}")
    out = [
        "<!-- generated by scripts/generate-docs.py from src/causalpos/schemas/config.schema.yaml: "
        "edit those, not this table -->",
        "",
        "### Every key",
        "",
        *table(["key", "allowed", "if left out", "config.yaml", "meaning"], main_rows(schema, config)),
        "",
        "### Variant parameters (`simulation.defaults`, `simulation.variants.NAME`)",
        "",
        "Fields of `causalpos.simulation.variant.Variant`, and the columns of the simulation tables too. A "
        "variant takes `simulation.defaults` and overrides some of them.",
        "",
        *table(
            ["key", "allowed", "if left out", "config.yaml defaults", "meaning"],
            def_rows(schema, "variant_fields", "variant.", variant_defaults, config["simulation"]["defaults"]),
        ),
        "",
        "### A data source (`data.sources`)",
        "",
        *table(["key", "allowed", "meaning"], def_rows(schema, "data_source", "data.sources.")),
        "",
        "### A pretrained model (`extraction.pretrained.models.NAME`)",
        "",
        *table(["key", "allowed", "meaning"], def_rows(schema, "pretrained_model", "pretrained.")),
        "",
        "### A figure (`figures.FIGURE`)",
        "",
        *table(["key", "allowed", "meaning"], def_rows(schema, "figure", "figures.")),
    ]
    return "\n".join(out)
