"""`causalpos`: look at a config before running it. Running is Snakemake's: `snakemake --cores 2 <file>` makes any
result and what it needs, and keeps its records of what it made (docs/cli.md).

    causalpos [--configfile F] check    # the checks Snakemake runs before any job: OK, or what is wrong
    causalpos [--configfile F] list     # the configured simulation variants, figures and models
"""

from __future__ import annotations

import argparse
import os
import sys

from causalpos.catalogue.models import TRAINED
from causalpos.workflow.config import load_config
from causalpos.workflow.settings import figure_variants, pretrained_models, results_dir, variant_params
from causalpos.workflow.user_errors import USER_ERRORS


def cmd_check(args, config) -> None:
    print(f"{args.configfile}: OK (results in {results_dir(config)})")


def cmd_list(args, config) -> None:
    for name in config["simulation"]["variants"]:
        print("variant", name, variant_params(config, name))
    for name in config["figures"]:
        print("figure", name, figure_variants(config, name))
    for name in TRAINED:
        print("model", name, "trained")
    for name in pretrained_models(config):
        print("model", name, "pretrained", config["extraction"]["pretrained"]["models"][name])


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors in one line, as the CLI's other errors."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="causalpos", description=__doc__.split("\n")[0])
    parser.add_argument("--configfile", default="config.yaml", help="workflow config (default: config.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="check the config as Snakemake does before any job").set_defaults(func=cmd_check)
    sub.add_parser("list", help="list the configured variants, figures and models").set_defaults(func=cmd_list)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # the machine's devices too: `check` answers for running here
        config = load_config(args.configfile, devices=args.command == "check")
        args.func(args, config)
    except USER_ERRORS as err:
        # what a user can fix (a setting, a file): one line, no traceback
        print(f"causalpos {args.command}: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `causalpos list | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error as Python flushes at exit
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
