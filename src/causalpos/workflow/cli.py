"""`causalpos <stage>`: run one workflow stage by hand, exactly as its Snakemake rule does."""

from __future__ import annotations

import argparse
import logging
import sys

from causalpos.figures.registry import ALL_LAYERS_FIGURE, CLAIMS_FIGURE
from causalpos.workflow import paths
from causalpos.workflow.config import (
    MODELS,
    ConfigError,
    claims_inputs,
    extracted_models,
    extraction_settings,
    figure_inputs,
    figure_options,
    figure_variants,
    load_config,
    model_location,
    variant_params,
)


def cmd_sample(args, config):
    from causalpos.workflow.stages import run_sample

    data = config["data"]
    run_sample(data["sources"], data["heldout_fraction"], data["seed"], data["max_documents"],
               args.output or paths.documents(args.results))


def cmd_tokenizer(args, config):
    from causalpos.workflow.stages import run_tokenizer

    tok, ev = config["tokenizer"], config["evaluation"]
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
    run_extract(args.model, extraction_settings(config, args.model), model_location(config, args.model, args.results),
                paths.activation_tables(args.model, args.results), documents=paths.documents(args.results),
                snippets=paths.tokens_file("snippets.npy", args.results), device=config["extraction"]["device"],
                seed=config["data"]["seed"])


def cmd_summary(args, config):
    from causalpos.workflow.stages import run_summary

    models = extracted_models(config)
    run_summary([paths.activation_table(m, "scores", args.results) for m in models],
                [paths.activation_table(m, "probe", args.results) for m in models], paths.summary_dir(args.results))


def cmd_claims(args, config):
    from causalpos.workflow.stages import run_claims

    run_claims(claims_inputs(config, args.results), config["claims"], paths.summary_file("claims.parquet", args.results),
               paths.summary_file("claims.md", args.results),
               paths.figure_files(CLAIMS_FIGURE, config["plot"]["formats"], args.results), config["plot"])


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
    from causalpos.workflow.stages import run_figure

    if args.figure == ALL_LAYERS_FIGURE:  # Figures 11-16 for one model, as rule model_figure draws them
        if args.model not in extracted_models(config):
            raise ConfigError(f"{ALL_LAYERS_FIGURE} needs --model, one of {extracted_models(config)}")
        options = {**config["plot"], "model": args.model}
        outputs = paths.figure_files(f"{ALL_LAYERS_FIGURE}_{args.model}", options["formats"], args.results)
        run_figure(args.figure, {"scores": [paths.activation_table(args.model, "scores", args.results)]}, options,
                   outputs)
        return
    if args.figure not in config["figures"]:
        raise ConfigError(f"figure {args.figure!r} is not in the config; configured: {sorted(config['figures'])}")
    options = figure_options(config, args.figure)
    outputs = paths.figure_files(args.figure, options["formats"], args.results)
    run_figure(args.figure, figure_inputs(config, args.figure, args.results), options, outputs)


def cmd_train(args, config):
    from causalpos.workflow.stages import run_train

    run_train(args.model, dict(config.get("training") or {}), paths.tokens_dir(args.results),
              paths.tokenizer_dir(args.results), paths.model_dir(args.model, args.results),
              paths.checkpoints_dir(args.results),
              processes=args.processes or config["train_processes"])


def cmd_evaluate(args, config):
    from causalpos.workflow.stages import run_length_eval

    ev = config["evaluation"]
    run_length_eval(paths.model_dir(args.model, args.results), paths.tokens_dir(args.results), ev["length_factors"],
                    ev["length_sequences"], paths.model_file(args.model, "length_eval.parquet", args.results),
                    device=(config.get("training") or {}).get("device", "auto"))


def cmd_list(args, config):
    for name in config["simulation"]["variants"]:
        print("variant", name, variant_params(config, name))
    for name in config["figures"]:
        print("figure", name, figure_variants(config, name))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="causalpos", description=__doc__)
    parser.add_argument("--configfile", default="config.yaml", help="workflow config (default: config.yaml)")
    parser.add_argument("--results", default="results", help="results folder (default: results)")
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
        config = load_config(args.configfile)
        args.func(args, config)
    except (ConfigError, ValueError) as err:  # bad settings: the message names the key
        print(f"causalpos: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
