"""`causalpos <stage>`: run one workflow stage by hand, exactly as its Snakemake rule does."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from causalpos.errors import UserError
from causalpos.figures.registry import ALL_LAYERS_FIGURE, CONVERGENCE_FIGURE, LENGTH_SEEDS_FIGURE
from causalpos.workflow import paths
from causalpos.workflow.config import (
    MODELS,
    ConfigError,
    claims_inputs,
    emergence_settings,
    emergence_variants,
    extra_seeds,
    extracted_models,
    extraction_settings,
    figure_inputs,
    figure_options,
    figure_variants,
    llm_claims_inputs,
    load_config,
    model_location,
    results_dir,
    snapshot_steps,
    variant_params,
)


class MissingInputError(UserError):
    """A stage's input does not exist yet; the message names it and the command that makes it."""


# the causalpos command that runs each rule's job (its wildcards filled in)
RULE_COMMANDS = {"sample": "sample", "tokenizer": "tokenizer", "theory": "theory", "simulate": "simulate {variant}",
                 "train": "train {model}", "length_eval": "evaluate {model}", "pretrained": "pretrained {model}",
                 "extract": "extract {model}", "summary": "summary", "claims": "claims", "figure": "plot {figure}",
                 "model_figure": "plot fig_all_layers --model {model}", "emergence": "emergence {model}",
                 "emergence_summary": "emergence-summary", "train_seed": "train-seed {model} {seed}",
                 "length_eval_seed": "evaluate-seed {model} {seed}", "length_seeds": "length-seeds",
                 "convergence": "convergence"}


def require_inputs(files) -> None:
    """MissingInputError naming the first missing file and the command that writes it."""
    missing = [str(f) for f in files if not Path(f).exists()]
    if not missing:
        return
    first = missing[0]
    writer = paths.writer_of(first)
    command = RULE_COMMANDS.get(writer[0], "").format(**writer[1]) if writer else ""
    how = f"`causalpos {command}` makes it" if command else "the workflow makes it"
    more = f" (and {len(missing) - 1} more missing input(s))" if len(missing) > 1 else ""
    raise MissingInputError(f"{first} does not exist{more}; {how}, or run the whole workflow: "
                            f"snakemake --cores 8 all_figures")


def cmd_sample(args, config):
    from causalpos.workflow.stages import run_sample

    data = config["data"]
    run_sample(data["sources"], data["heldout_fraction"], data["seed"], data["max_documents"],
               args.output or paths.documents(args.results))


def cmd_tokenizer(args, config):
    from causalpos.workflow.stages import run_tokenizer

    tok, ev = config["tokenizer"], config["evaluation"]
    require_inputs([paths.documents(args.results)])
    run_tokenizer(paths.documents(args.results), tok["name"], tok["vocab_size"], tok["block_len"],
                  ev["snippet_len"], ev["n_snippets"], config["data"]["seed"],
                  paths.tokenizer_dir(args.results), paths.tokens_dir(args.results))


def cmd_pretrained(args, config):
    from causalpos.workflow.stages import run_pretrained

    spec = config["extraction"]["pretrained"]["models"].get(args.model)
    if spec is None or "gguf" not in spec:
        raise ConfigError(f"extraction.pretrained.models.{args.model}: not a gguf model; only those are converted")
    run_pretrained(args.model, spec, paths.pretrained_dir(args.model, args.results))


def cmd_extract(args, config):
    from causalpos.workflow.stages import run_extract

    if args.model not in extracted_models(config):
        raise ConfigError(f"unknown model {args.model!r}; known: {extracted_models(config)}")
    location = model_location(config, args.model, args.results)
    if args.model in MODELS:
        require_inputs([paths.model_file(args.model, "model.safetensors", args.results),
                        paths.tokens_file("snippets.npy", args.results)])
    else:
        local = [location] if "gguf" in config["extraction"]["pretrained"]["models"][args.model] else []
        require_inputs(local + [paths.documents(args.results)])
    run_extract(args.model, extraction_settings(config, args.model), location,
                paths.activation_tables(args.model, args.results), documents=paths.documents(args.results),
                snippets=paths.tokens_file("snippets.npy", args.results), device=config["extraction"]["device"],
                seed=config["data"]["seed"], state_dir=paths.extraction_state_dir(args.model, args.results))


def cmd_summary(args, config):
    from causalpos.workflow.stages import run_summary

    models = extracted_models(config)
    scores = [paths.activation_table(m, "scores", args.results) for m in models]
    probes = [paths.activation_table(m, "probe", args.results) for m in models]
    require_inputs(scores + probes)
    run_summary(scores, probes, paths.summary_dir(args.results))


def cmd_claims(args, config):
    from causalpos.workflow.stages import run_claims

    inputs = claims_inputs(config, args.results)
    # the convergence table only adds notes: used where it exists (`causalpos convergence` makes it)
    inputs["convergence"] = [f for f in inputs["convergence"] if Path(f).exists()]
    require_inputs([f for files in inputs.values() for f in files])
    run_claims(inputs, config["claims"], paths.summary_file("claims.parquet", args.results),
               paths.summary_file("claims.md", args.results),
               paths.claims_dir(args.results), config["plot"])


def cmd_convergence(args, config):
    from causalpos.workflow.stages import run_convergence

    inputs = {name: files for name, files in llm_claims_inputs(config, args.results).items()
              if name in ("scores", "groups")}
    if not inputs["scores"]:
        raise ConfigError("extraction.pretrained.models names no model: the convergence table has nothing to measure")
    require_inputs([f for files in inputs.values() for f in files])
    run_convergence(inputs, config["claims"], paths.summary_file("convergence.parquet", args.results),
                    paths.figure_files(CONVERGENCE_FIGURE, config["plot"]["formats"], args.results), config["plot"])


def cmd_theory(args, config):
    from causalpos.workflow.stages import run_theory

    run_theory(config["theory"]["seq_len"], config["theory"]["alphas"],
               args.output or paths.theory_table(args.results))


def cmd_simulate(args, config):
    from causalpos.workflow.stages import run_simulation

    run_simulation(args.variant, variant_params(config, args.variant),
                   args.output or paths.simulation_table(args.variant, args.results),
                   device=args.device or config["device"],
                   threads=args.threads or config["simulation"]["threads"],
                   chunk_size=config["simulation"]["chunk_size"])


def cmd_plot(args, config):
    from causalpos.workflow.stages import run_all_layers, run_figure

    if args.figure == ALL_LAYERS_FIGURE:  # Figures 11-16 for one model, as rule model_figure draws them
        known = extracted_models(config)
        if args.model is None:
            raise ConfigError(f"{ALL_LAYERS_FIGURE} needs --model, one of {known}")
        if args.model not in known:
            raise ConfigError(f"--model {args.model}: not an extracted model; known: {known}")
        options = {**config["plot"], "model": args.model}
        scores = paths.activation_table(args.model, "scores", args.results)
        require_inputs([scores])
        run_all_layers(scores, options, paths.all_layers_dir(args.model, args.results))
        return
    if args.figure not in config["figures"]:
        raise ConfigError(f"figure {args.figure!r} is not in the config; configured: {sorted(config['figures'])}")
    options = figure_options(config, args.figure)
    outputs = paths.figure_files(args.figure, options["formats"], args.results)
    inputs = figure_inputs(config, args.figure, args.results)
    require_inputs([f for files in inputs.values() for f in files])
    run_figure(args.figure, inputs, options, outputs)


def cmd_train(args, config):
    from causalpos.workflow.stages import run_train

    require_inputs([paths.tokens_file("blocks.json", args.results), f"{paths.tokenizer_dir(args.results)}/tokenizer.json"])
    run_train(args.model, dict(config.get("training") or {}), paths.tokens_dir(args.results),
              paths.tokenizer_dir(args.results), paths.model_dir(args.model, args.results),
              paths.checkpoints_dir(args.results),
              processes=args.processes or config["train_processes"])


def cmd_evaluate(args, config):
    from causalpos.workflow.stages import run_length_eval

    ev = config["evaluation"]
    require_inputs([paths.model_file(args.model, "model.safetensors", args.results),
                    paths.tokens_file("blocks.json", args.results)])
    run_length_eval(paths.model_dir(args.model, args.results), paths.tokens_dir(args.results), ev["length_factors"],
                    ev["length_sequences"], paths.model_file(args.model, "length_eval.parquet", args.results),
                    device=(config.get("training") or {}).get("device", "auto"))


def cmd_emergence(args, config):
    from causalpos.workflow.stages import run_emergence

    snapshots = [paths.snapshot_file(args.model, s, args.results) for s in snapshot_steps(config)]
    metrics = paths.model_file(args.model, "metrics.parquet", args.results)
    require_inputs([metrics, *snapshots, paths.tokens_file("snippets.npy", args.results)])
    run_emergence(args.model, emergence_settings(config), paths.model_dir(args.model, args.results), snapshots,
                  paths.tokens_file("snippets.npy", args.results), paths.tokens_dir(args.results), metrics,
                  paths.emergence_tables(args.model, args.results), device=config["extraction"]["device"],
                  seed=config["data"]["seed"])


def cmd_emergence_summary(args, config):
    from causalpos.workflow.stages import run_emergence_summary

    inputs = {table: [paths.emergence_table(m, table, args.results) for m in MODELS]
              for table in paths.EMERGENCE_TABLES}
    simulations = [paths.simulation_table(v, args.results) for v in emergence_variants(config)]
    require_inputs([f for files in inputs.values() for f in files] + simulations)
    run_emergence_summary(inputs, simulations, config["claims"], paths.summary_file("emergence.parquet", args.results))


def cmd_train_seed(args, config):
    from causalpos.workflow.stages import run_train

    require_inputs([paths.tokens_file("blocks.json", args.results),
                    f"{paths.tokenizer_dir(args.results)}/tokenizer.json"])
    settings = {**dict(config.get("training") or {}), "seed": args.seed, "snapshot_steps": 0}
    run_train(args.model, settings, paths.tokens_dir(args.results), paths.tokenizer_dir(args.results),
              paths.seed_model_dir(args.model, args.seed, args.results), paths.checkpoints_dir(args.results),
              processes=args.processes or config["train_processes"])


def cmd_evaluate_seed(args, config):
    from causalpos.workflow.stages import run_length_eval

    ev = config["evaluation"]
    model_dir = paths.seed_model_dir(args.model, args.seed, args.results)
    require_inputs([f"{model_dir}/model.safetensors", paths.tokens_file("blocks.json", args.results)])
    run_length_eval(model_dir, paths.tokens_dir(args.results), ev["length_factors"], ev["length_sequences"],
                    f"{model_dir}/length_eval.parquet", device=(config.get("training") or {}).get("device", "auto"))


def cmd_length_seeds(args, config):
    from causalpos.workflow.stages import run_length_seeds

    seed = int((config.get("training") or {}).get("seed", 0))
    runs = [(m, seed, paths.model_file(m, "length_eval.parquet", args.results)) for m in MODELS]
    runs += [(m, s, paths.seed_model_file(m, s, "length_eval.parquet", args.results)) for m in MODELS
             for s in extra_seeds(config)]
    require_inputs([path for _, _, path in runs])
    run_length_seeds(runs, paths.summary_file("length_seeds.parquet", args.results),
                     paths.figure_files(LENGTH_SEEDS_FIGURE, config["plot"]["formats"], args.results), config["plot"])


def cmd_list(args, config):
    for name in config["simulation"]["variants"]:
        print("variant", name, variant_params(config, name))
    for name in config["figures"]:
        print("figure", name, figure_variants(config, name))


# the device key each stage runs on: `cuda` there needs CUDA on this machine (the others are not checked)
STAGE_DEVICE = {"simulate": ["device"], "train": ["training.device"], "evaluate": ["training.device"],
                "extract": ["extraction.device"], "emergence": ["extraction.device"],
                "train-seed": ["training.device"], "evaluate-seed": ["training.device"]}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="causalpos", description=__doc__)
    parser.add_argument("--configfile", default="config.yaml", help="workflow config (default: config.yaml)")
    parser.add_argument("--results", help="results folder (default: the config's `results`, else results)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sample", help="sample documents from the configured corpora to Parquet")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("tokenizer", help="train or load the tokenizer; write token blocks and snippets")
    p.set_defaults(func=cmd_tokenizer)

    p = sub.add_parser("train", help="train the NoPE decoder or its RoPE twin (resumes from its checkpoint)")
    p.add_argument("model", choices=MODELS)
    p.add_argument("--processes", type=int, help="DDP processes via torchrun (default: train_processes)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="held-out loss of a trained model at 1x, 2x, 4x the training length")
    p.add_argument("model", choices=MODELS)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("emergence", help="the extraction and the held-out loss at every training snapshot of a model")
    p.add_argument("model", choices=MODELS)
    p.set_defaults(func=cmd_emergence)

    p = sub.add_parser("emergence-summary", help="claim 7's metrics over training, both models, to results/summary")
    p.set_defaults(func=cmd_emergence_summary)

    p = sub.add_parser("train-seed", help="train a model again with another seed (the length comparison over seeds)")
    p.add_argument("model", choices=MODELS)
    p.add_argument("seed", type=int)
    p.add_argument("--processes", type=int, help="DDP processes via torchrun (default: train_processes)")
    p.set_defaults(func=cmd_train_seed)

    p = sub.add_parser("evaluate-seed", help="length evaluation of a model trained with another seed")
    p.add_argument("model", choices=MODELS)
    p.add_argument("seed", type=int)
    p.set_defaults(func=cmd_evaluate_seed)

    p = sub.add_parser("length-seeds", help="length generalisation over seeds: table and figure")
    p.set_defaults(func=cmd_length_seeds)

    p = sub.add_parser("pretrained", help="convert a GGUF model of extraction.pretrained.models to safetensors")
    p.add_argument("model")
    p.set_defaults(func=cmd_pretrained)

    p = sub.add_parser("extract", help="attention scores, Figure 3 intermediates and position probe of one model")
    p.add_argument("model", help="nope, rope or a name under extraction.pretrained.models")
    p.set_defaults(func=cmd_extract)

    p = sub.add_parser("summary", help="per-layer measured claims of every extracted model to results/summary")
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("claims", help="the claims ledger (every claim of the paper as a verdict) to results/summary")
    p.set_defaults(func=cmd_claims)

    p = sub.add_parser("convergence", help="the LLM claims on the first groups of sequences to results/summary")
    p.set_defaults(func=cmd_convergence)

    p = sub.add_parser("theory", help="closed-form layer-2 scores to Parquet")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_theory)

    p = sub.add_parser("simulate", help="Monte Carlo of one simulation variant to Parquet")
    p.add_argument("variant", help="a name under simulation.variants")
    p.add_argument("-o", "--output")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=int)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("plot", help="draw one figure from the Parquet results")
    p.add_argument("figure", help="a name under figures, e.g. fig02_l2norm, or fig_all_layers with --model")
    p.add_argument("--model", help="the model of fig_all_layers")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("list", help="list the configured variants and figures")
    p.set_defaults(func=cmd_list)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        config = load_config(args.configfile, devices=STAGE_DEVICE.get(args.command, []))
        args.results = args.results or results_dir(config)
        args.func(args, config)
    except (ValueError, UserError) as err:
        # what a user can fix (a setting, a missing or damaged file): one line, no traceback
        print(f"causalpos {args.command}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
