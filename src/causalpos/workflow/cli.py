"""`causalpos <stage>`: run one workflow stage by hand, exactly as its Snakemake rule does.

The commands, their arguments and help are those of the stages in workflow.dag; each command reads the
files and params its stage's rule would (dag.inputs, dag.params) and calls the same runner.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from causalpos.errors import UserError
from causalpos.catalogue.figures import ALL_LAYERS_FIGURE
from causalpos.catalogue import paths
from causalpos.workflow import dag
from causalpos.workflow.config import (
    MODELS,
    ConfigError,
    extracted_models,
    figure_variants,
    load_config,
    results_dir,
    variant_params,
)
from causalpos.workflow.user_errors import USER_ERRORS


class MissingInputError(UserError):
    """A stage's input does not exist yet; the message names it and the command that makes it."""


def require_inputs(files) -> None:
    """MissingInputError naming the first missing file and the command that writes it."""
    missing = [str(f) for f in files if not Path(f).exists()]
    if not missing:
        return
    first = missing[0]
    command = dag.command_for(first)
    how = f"`causalpos {command}` makes it" if command else "the workflow makes it"
    more = f" (and {len(missing) - 1} more missing input(s))" if len(missing) > 1 else ""
    raise MissingInputError(f"{first} does not exist{more}; {how}, or run the whole workflow: "
                            f"snakemake --cores 8 all_figures")


def job(config, results: str, stage: str, **wildcards) -> dict:
    """One job of `stage`: its inputs checked to exist, its params (the runner's keyword arguments)."""
    inputs = dag.inputs(config, results, stage, **wildcards)
    require_inputs(dag.flatten(inputs))
    return {"inputs": inputs, "params": dag.params(config, results, stage, **wildcards)}


def cmd_sample(args, config):
    from causalpos.workflow.runners import run_sample

    run_sample(output=args.output or paths.documents(args.results), **job(config, args.results, "sample")["params"])


def cmd_tokenizer(args, config):
    from causalpos.workflow.runners import run_tokenizer

    this = job(config, args.results, "tokenizer")
    run_tokenizer(this["inputs"]["documents"], tokenizer_dir=paths.tokenizer_dir(args.results),
                  tokens_dir=paths.tokens_dir(args.results), **this["params"])


def cmd_pretrained(args, config):
    from causalpos.workflow.runners import run_pretrained

    spec = config["extraction"]["pretrained"]["models"].get(args.model)
    if spec is None or "gguf" not in spec:
        raise ConfigError(f"extraction.pretrained.models.{args.model}: not a gguf model; only those are converted")
    run_pretrained(args.model, out_dir=paths.pretrained_dir(args.model, args.results),
                   **job(config, args.results, "pretrained", model=args.model)["params"])


def cmd_extract(args, config):
    from causalpos.workflow.runners import run_extract

    if args.model not in extracted_models(config):
        raise ConfigError(f"unknown model {args.model!r}; known: {extracted_models(config)}")
    stage = "extract_trained" if args.model in MODELS else "extract_pretrained"
    this = job(config, args.results, stage, model=args.model)
    run_extract(args.model, outputs=paths.activation_tables(args.model, args.results),
                documents=this["inputs"].get("documents"), snippets=this["inputs"].get("tokens"),
                state_dir=paths.extraction_state_dir(args.model, args.results), **this["params"])


def cmd_summary(args, config):
    from causalpos.workflow.runners import run_summary

    inputs = job(config, args.results, "summary")["inputs"]
    run_summary(inputs["scores"], inputs["probe"], paths.summary_dir(args.results))


def cmd_heads(args, config):
    from causalpos.workflow.runners import run_heads

    this = job(config, args.results, "heads")
    run_heads(this["inputs"]["head_scores"], output=paths.summary_file("heads.parquet", args.results),
              **this["params"])


def cmd_claims(args, config):
    from causalpos.workflow.runners import run_claims

    inputs = dag.inputs(config, args.results, "claims")
    # the convergence table only adds notes: used where it exists (`causalpos convergence` makes it)
    inputs["convergence"] = [f for f in inputs["convergence"] if Path(f).exists()]
    require_inputs(dag.flatten(inputs))
    run_claims(inputs, table=paths.summary_file("claims.parquet", args.results),
               markdown=paths.summary_file("claims.md", args.results), folder=paths.claims_dir(args.results),
               **dag.params(config, args.results, "claims"))


def cmd_convergence(args, config):
    from causalpos.workflow.runners import run_convergence
    from causalpos.catalogue.figures import CONVERGENCE_FIGURE

    this = job(config, args.results, "convergence")  # no model: nothing to require, and nothing to measure
    if not this["inputs"]["scores"]:
        raise ConfigError("extraction.pretrained.models names no model: the convergence table has nothing to measure")
    run_convergence(this["inputs"], table=paths.summary_file("convergence.parquet", args.results),
                    figures=paths.figure_files(CONVERGENCE_FIGURE, config["plot"]["formats"], args.results),
                    **this["params"])


def cmd_window_test(args, config):
    from causalpos.workflow.runners import run_window_test

    this = job(config, args.results, "window_test")
    if not this["inputs"]["scores"]:
        raise ConfigError("extraction.pretrained.models names no model: the window test has nothing to measure")
    run_window_test(this["inputs"], output=paths.summary_file("window_test.parquet", args.results), **this["params"])


def cmd_theory(args, config):
    from causalpos.workflow.runners import run_theory

    run_theory(output=args.output or paths.theory_table(args.results), **job(config, args.results, "theory")["params"])


def cmd_recursion(args, config):
    from causalpos.workflow.runners import run_recursion

    run_recursion(output=args.output or paths.recursion_table(args.results),
                  **job(config, args.results, "recursion")["params"])


def cmd_simulate(args, config):
    from causalpos.workflow.runners import run_simulation

    params = job(config, args.results, "simulate", variant=args.variant)["params"]
    output = args.output or paths.simulation_table(args.variant, args.results)
    groups = (str(Path(output).with_name(Path(output).stem + ".groups.parquet")) if args.output
              else paths.simulation_groups(args.variant, args.results))
    run_simulation(args.variant, output=output, groups_output=groups,
                   **{**params, "device": args.device or params["device"]},
                   threads=args.threads or config["simulation"]["threads"])


def cmd_plot(args, config):
    from causalpos.workflow.runners import run_all_layers, run_figure

    if args.figure == ALL_LAYERS_FIGURE:  # Figures 11-16 for one model, as rule model_figure draws them
        known = extracted_models(config)
        if args.model is None:
            raise ConfigError(f"{ALL_LAYERS_FIGURE} needs --model, one of {known}")
        if args.model not in known:
            raise ConfigError(f"--model {args.model}: not an extracted model; known: {known}")
        stage = "model_figure_trained" if args.model in MODELS else "model_figure_pretrained"
        this = job(config, args.results, stage, model=args.model)
        run_all_layers(this["inputs"]["scores"], folder=paths.all_layers_dir(args.model, args.results),
                       **this["params"])
        return
    if args.figure not in config["figures"]:
        raise ConfigError(f"figure {args.figure!r} is not in the config; configured: {sorted(config['figures'])}")
    this = job(config, args.results, "figure", figure=args.figure)
    outputs = paths.figure_files(args.figure, this["params"]["options"]["formats"], args.results)
    run_figure(args.figure, this["inputs"], outputs=outputs, **this["params"])


def cmd_train(args, config):
    from causalpos.workflow.runners import run_train

    params = job(config, args.results, "train", model=args.model)["params"]
    run_train(args.model, tokens_dir=paths.tokens_dir(args.results), tokenizer_dir=paths.tokenizer_dir(args.results),
              out_dir=paths.model_dir(args.model, args.results), checkpoint_root=paths.checkpoints_dir(args.results),
              **{**params, "processes": args.processes or params["processes"]})


def cmd_evaluate(args, config):
    from causalpos.workflow.runners import run_length_eval

    run_length_eval(paths.model_dir(args.model, args.results), paths.tokens_dir(args.results),
                    output=paths.model_file(args.model, "length_eval.parquet", args.results),
                    **job(config, args.results, "length_eval", model=args.model)["params"])


def cmd_emergence(args, config):
    from causalpos.workflow.runners import run_emergence

    this = job(config, args.results, "emergence", model=args.model)
    inputs = this["inputs"]
    run_emergence(args.model, model_dir=paths.model_dir(args.model, args.results), snapshots_dir=inputs["snapshots"],
                  snippets=inputs["tokens"], blocks_dir=paths.tokens_dir(args.results), metrics=inputs["metrics"],
                  outputs=paths.emergence_tables(args.model, args.results), **this["params"])


def cmd_emergence_summary(args, config):
    from causalpos.workflow.runners import run_emergence_summary

    this = job(config, args.results, "emergence_summary")
    inputs = dict(this["inputs"])
    simulations, simulation_groups = inputs.pop("simulations"), inputs.pop("simulation_groups")
    run_emergence_summary(inputs, simulations, simulation_groups,
                          output=paths.summary_file("emergence.parquet", args.results),
                          **this["params"])


def cmd_train_seed(args, config):
    from causalpos.workflow.runners import run_train

    params = job(config, args.results, "train_seed", model=args.model, seed=args.seed)["params"]
    run_train(args.model, tokens_dir=paths.tokens_dir(args.results), tokenizer_dir=paths.tokenizer_dir(args.results),
              out_dir=paths.seed_model_dir(args.model, args.seed, args.results),
              checkpoint_root=paths.checkpoints_dir(args.results),
              **{**params, "processes": args.processes or params["processes"]})


def cmd_evaluate_seed(args, config):
    from causalpos.workflow.runners import run_length_eval

    model_dir = paths.seed_model_dir(args.model, args.seed, args.results)
    run_length_eval(model_dir, paths.tokens_dir(args.results), output=f"{model_dir}/length_eval.parquet",
                    **job(config, args.results, "length_eval_seed", model=args.model, seed=args.seed)["params"])


def cmd_length_seeds(args, config):
    from causalpos.catalogue.figures import LENGTH_SEEDS_FIGURE
    from causalpos.workflow.runners import run_length_seeds

    options = job(config, args.results, "length_seeds_table")["params"]["options"]
    run_length_seeds(dag.length_runs(config, args.results), paths.summary_file("length_seeds.parquet", args.results),
                     paths.figure_files(LENGTH_SEEDS_FIGURE, options["formats"], args.results), options)


def cmd_ablate(args, config):
    from causalpos.workflow.runners import run_pattern_ablation, run_pattern_ablation_pretrained

    if args.model not in extracted_models(config):
        raise ConfigError(f"unknown model {args.model!r}; known: {extracted_models(config)}")
    if args.model in MODELS:
        run_pattern_ablation(model_dir=paths.model_dir(args.model, args.results),
                             tokens_dir=paths.tokens_dir(args.results),
                             output=paths.model_file(args.model, paths.ABLATION_FILE, args.results),
                             **job(config, args.results, "pattern_ablation", model=args.model)["params"])
        return
    this = job(config, args.results, "pattern_ablation_pretrained", model=args.model)
    run_pattern_ablation_pretrained(documents=this["inputs"]["documents"],
                                    output=paths.pretrained_ablation(args.model, args.results), **this["params"])


def cmd_ablate_seed(args, config):
    from causalpos.workflow.runners import run_pattern_ablation

    model_dir = paths.seed_model_dir(args.model, args.seed, args.results)
    run_pattern_ablation(model_dir=model_dir, tokens_dir=paths.tokens_dir(args.results),
                         output=paths.seed_model_file(args.model, args.seed, paths.ABLATION_FILE, args.results),
                         **job(config, args.results, "pattern_ablation_seed", model=args.model, seed=args.seed)[
                             "params"])


def ablation_summary(config, results: str, stage: str, folder: str) -> None:
    """Rule pattern_ablation_summary (folder: the results folder) or pattern_ablation_seeds (results/seeds)."""
    from causalpos.catalogue.figures import ABLATION_FIGURE
    from causalpos.workflow.runners import run_pattern_ablation_summary

    this = job(config, results, stage)
    run_pattern_ablation_summary(this["inputs"]["tables"], paths.summary_file(paths.ABLATION_FILE, folder),
                                 paths.figure_files(ABLATION_FIGURE, config["plot"]["formats"], folder),
                                 **this["params"])


def cmd_ablation_summary(args, config):
    ablation_summary(config, args.results, "pattern_ablation_summary", args.results)


def cmd_ablation_seeds(args, config):
    ablation_summary(config, args.results, "pattern_ablation_seeds", paths.seeds_dir(args.results))


def cmd_ablation_claims(args, config):
    from causalpos.workflow.runners import run_claims

    folder = paths.seeds_dir(args.results)
    this = job(config, args.results, "length_seeds_claims")
    run_claims(this["inputs"], table=paths.summary_file("claims.parquet", folder),
               markdown=paths.summary_file("claims.md", folder), folder=paths.claims_dir(folder), **this["params"])


def cmd_list(args, config):
    for name in config["simulation"]["variants"]:
        print("variant", name, variant_params(config, name))
    for name in config["figures"]:
        print("figure", name, figure_variants(config, name))


def positive_int(text: str) -> int:
    """A count of processes or threads: a whole number >= 1 (0 and negatives meant nothing, silently)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed; give 1 or more")
    return value


# the device key each stage runs on: `cuda` there needs CUDA on this machine (the others are not checked)
STAGE_DEVICE = {"simulate": ["device"], "train": ["training.device"], "evaluate": ["training.device"],
                "extract": ["extraction.device"], "emergence": ["extraction.device"],
                "train-seed": ["training.device"], "evaluate-seed": ["training.device"],
                "ablate-seed": ["training.device"]}
# a command's options besides its stage's wildcards
OPTIONS = {
    "sample": [(("-o", "--output"), {})],
    "theory": [(("-o", "--output"), {})],
    "recursion": [(("-o", "--output"), {})],
    "simulate": [(("-o", "--output"), {}), (("--device",), {"choices": ["auto", "cpu", "cuda"]}),
                 (("--threads",), {"type": positive_int, "help": "CPU threads (default: simulation.threads)"})],
    "train": [(("--processes",), {"type": positive_int, "help": "DDP processes via torchrun (default: train_processes)"})],
    "train-seed": [(("--processes",), {"type": positive_int,
                                       "help": "DDP processes via torchrun (default: train_processes)"})],
    "plot": [(("--model",), {"help": f"the model of {ALL_LAYERS_FIGURE}"})],
}
WILDCARD_HELP = {"model": "nope, rope or a name under extraction.pretrained.models", "variant":
                 "a name under simulation.variants", "figure": f"a name under figures, e.g. fig02_l2norm, or "
                 f"{ALL_LAYERS_FIGURE} with --model", "seed": "a training seed"}


def commands() -> dict[str, list[dag.Stage]]:
    """Each command (the first word of a stage's `command`) -> the stages it runs, in registry order."""
    found: dict[str, list[dag.Stage]] = {}
    for entry in dag.STAGE_LIST:
        if entry.command:
            found.setdefault(entry.command.split()[0], []).append(entry)
    return found


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors in one line, as the CLI's other errors (its usage block buried the message)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="causalpos", description=__doc__.split("\n")[0])
    parser.add_argument("--configfile", default="config.yaml", help="workflow config (default: config.yaml)")
    parser.add_argument("--results", help="results folder (default: the config's `results`, else results)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, stages in commands().items():
        p = sub.add_parser(name, help=stages[0].description)
        for word in stages[0].command.split()[1:]:
            if word.startswith("{"):  # a wildcard: a positional argument
                wildcard = word.strip("{}")
                kind = {"type": int} if wildcard == "seed" else {}
                if wildcard == "model" and all(s.models == "trained" for s in stages):
                    kind = {"choices": MODELS}
                p.add_argument(wildcard, help=WILDCARD_HELP[wildcard], **kind)
        for flags, kwargs in OPTIONS.get(name, []):
            p.add_argument(*flags, **kwargs)
        p.set_defaults(func=globals()[f"cmd_{name.replace('-', '_')}"])
    p = sub.add_parser("list", help="list the configured variants and figures")
    p.set_defaults(func=cmd_list)
    return parser


class OutputError(UserError):
    """-o or the results folder names somewhere this process cannot write."""


def check_writable(path, option: str, file: bool = False) -> None:
    """OutputError unless `path` can be written: a folder (or with `file`, a file) that exists and is writable,
    or whose nearest existing parent is a writable folder. Nothing is left behind: a refused command leaves no
    trace, an accepted one makes its folders as it writes."""
    path = Path(path)
    if file and path.is_dir():
        raise OutputError(f"{option} {path} is a folder; name the file to write (e.g. {path / 'table.parquet'})")
    if not file and path.exists() and not path.is_dir():
        raise OutputError(f"{option} {path} is a file, not a folder; name a folder for the results")
    existing = path if path.exists() else next(p for p in path.absolute().parents if p.exists())
    folder = existing.parent if existing.is_file() and existing == path else existing
    if not folder.is_dir():
        raise OutputError(f"{option} {path}: {folder} is a file, so no folder can be made under it")
    try:  # a real write: permissions, a read-only mount, /proc; os.access says yes to root everywhere
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise OutputError(f"{option} {path}: cannot write in {folder} ({err.strerror}); choose another place") from None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        config = load_config(args.configfile, devices=STAGE_DEVICE.get(args.command, []))
        args.results = args.results or results_dir(config)
        if args.command != "list":  # every other command writes under the results folder (or -o)
            check_writable(args.results, "--results" if "--results" in (argv or sys.argv) else "results")
        if getattr(args, "output", None):
            check_writable(args.output, "-o", file=True)
        args.func(args, config)
    except USER_ERRORS as err:
        # what a user can fix (a setting, a missing or damaged file): one line, no traceback
        print(f"causalpos {args.command}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
