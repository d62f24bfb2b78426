"""`causalpos <stage>`: run one workflow stage by hand, exactly as its Snakemake rule does."""

from __future__ import annotations

import argparse
import logging
import sys

from causalpos.config import (
    ALL_LAYERS_FIGURE,
    MODELS,
    ConfigError,
    ACTIVATION_TABLES,
    CLAIMS_FIGURE,
    claims_inputs,
    activation_table,
    extracted_models,
    extraction_settings,
    figure_inputs,
    figure_options,
    figure_variants,
    load_config,
    model_location,
    simulation_table,
    variant_params,
)


def cmd_sample(args, config):
    from causalpos.stages import run_sample

    data = config["data"]
    run_sample(data["sources"], data["heldout_fraction"], data["seed"], data["max_documents"],
               args.output or f"{args.results}/data/documents.parquet")


def cmd_tokenizer(args, config):
    from causalpos.stages import run_tokenizer

    tok, ev = config["tokenizer"], config["evaluation"]
    run_tokenizer(f"{args.results}/data/documents.parquet", tok["name"], tok["vocab_size"], tok["block_len"],
                  ev["snippet_len"], ev["n_snippets"], config["data"]["seed"],
                  f"{args.results}/tokenizer", f"{args.results}/tokens")


def cmd_pretrained(args, config):
    from causalpos.stages import run_pretrained

    spec = config["extraction"]["pretrained"]["models"].get(args.model)
    if spec is None or "gguf" not in spec:
        raise ConfigError(f"extraction.pretrained.models.{args.model}: not a gguf model; only those are converted")
    run_pretrained(args.model, spec, f"{args.results}/pretrained/{args.model}")


def cmd_extract(args, config):
    from causalpos.stages import run_extract

    if args.model not in extracted_models(config):
        raise ConfigError(f"unknown model {args.model!r}; known: {extracted_models(config)}")
    outputs = {t: activation_table(args.model, t, args.results) for t in ACTIVATION_TABLES}
    run_extract(args.model, extraction_settings(config, args.model), model_location(config, args.model, args.results),
                outputs, documents=f"{args.results}/data/documents.parquet",
                snippets=f"{args.results}/tokens/snippets.npy", device=config["extraction"]["device"],
                seed=config["data"]["seed"])


def cmd_summary(args, config):
    from causalpos.stages import run_summary

    models = extracted_models(config)
    run_summary([activation_table(m, "scores", args.results) for m in models],
                [activation_table(m, "probe", args.results) for m in models], f"{args.results}/summary")


def cmd_claims(args, config):
    from causalpos.stages import run_claims

    summary, figures = f"{args.results}/summary", f"{args.results}/figures"
    run_claims(claims_inputs(config, args.results), config["claims"], f"{summary}/claims.parquet",
               f"{summary}/claims.md", [f"{figures}/{CLAIMS_FIGURE}.{fmt}" for fmt in config["plot"]["formats"]],
               config["plot"])


def cmd_theory(args, config):
    from causalpos.stages import run_theory

    run_theory(config["theory"]["seq_len"], config["theory"]["alphas"],
               args.output or f"{args.results}/theory/layer2_scores.parquet")


def cmd_simulate(args, config):
    from causalpos.stages import run_simulation

    run_simulation(args.variant, variant_params(config, args.variant),
                   args.output or simulation_table(args.variant, args.results),
                   device=args.device or config["device"],
                   threads=args.threads or config["simulation"]["threads"],
                   chunk_size=config["simulation"]["chunk_size"])


def cmd_plot(args, config):
    from causalpos.stages import run_figure

    if args.figure == ALL_LAYERS_FIGURE:  # Figures 11-16 for one model, as rule model_figure draws them
        if args.model not in extracted_models(config):
            raise ConfigError(f"{ALL_LAYERS_FIGURE} needs --model, one of {extracted_models(config)}")
        options = {**config["plot"], "model": args.model}
        outputs = [f"{args.results}/figures/{ALL_LAYERS_FIGURE}_{args.model}.{fmt}" for fmt in options["formats"]]
        run_figure(args.figure, {"scores": [activation_table(args.model, "scores", args.results)]}, options, outputs)
        return
    if args.figure not in config["figures"]:
        raise ConfigError(f"figure {args.figure!r} is not in the config; configured: {sorted(config['figures'])}")
    options = figure_options(config, args.figure)
    outputs = [f"{args.results}/figures/{args.figure}.{fmt}" for fmt in options["formats"]]
    run_figure(args.figure, figure_inputs(config, args.figure, args.results), options, outputs)


def cmd_train(args, config):
    from causalpos.stages import run_train

    run_train(args.model, dict(config.get("training") or {}), f"{args.results}/tokens", f"{args.results}/tokenizer",
              f"{args.results}/models/{args.model}", f"{args.results}/checkpoints",
              processes=args.processes or config["train_processes"])


def cmd_evaluate(args, config):
    from causalpos.stages import run_length_eval

    ev = config["evaluation"]
    run_length_eval(f"{args.results}/models/{args.model}", f"{args.results}/tokens", ev["length_factors"],
                    ev["length_sequences"], f"{args.results}/models/{args.model}/length_eval.parquet",
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
