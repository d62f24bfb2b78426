"""The models this project trains, and the names of their runs.

Section 4.2's pair: a decoder without positional encoding (`nope`) and its RoPE twin (`rope`), trained with
`training.seed`. The same training with another seed of `evaluation.seeds` (the comparison over seeds, target
length_seeds) is a run of its own, named `<model>_seed<seed>` (`nope_seed1`): its folder, its rule jobs and its
rows say which model and seed it is.
"""

from __future__ import annotations

import re

TRAINED = ("nope", "rope")  # the NoPE decoder and its RoPE twin (Section 4.2)
ROPE_MODELS = ("rope",)  # the trained models that rotate queries and keys
SEED_RUN = re.compile(r"(?P<model>[a-z]+)_seed(?P<seed>\d+)")


def seed_run(model: str, seed: int | None = None) -> str:
    """The run of trained `model` with another seed: "nope_seed1"; `model` itself for seed None (training.seed)."""
    if model not in TRAINED:
        raise ValueError(f"unknown trained model {model!r}; known: {list(TRAINED)}")
    return model if seed is None else f"{model}_seed{int(seed)}"


def parse_run(run: str) -> tuple[str, int | None]:
    """(model, seed) of a trained run: ("nope", None) for "nope" (training.seed), ("nope", 1) for "nope_seed1"."""
    if run in TRAINED:
        return run, None
    match = SEED_RUN.fullmatch(run)
    if match is None or match["model"] not in TRAINED:
        raise ValueError(f"{run!r} is not a trained run: one of {list(TRAINED)}, or one of them with _seed<N>")
    return match["model"], int(match["seed"])


def is_trained(name: str) -> bool:
    """Whether `name` is one of the trained models or their seed runs (any other model is pretrained)."""
    try:
        parse_run(name)
    except ValueError:
        return False
    return True


def uses_rope(run: str) -> bool:
    """Whether a trained run rotates queries and keys."""
    return parse_run(run)[0] in ROPE_MODELS


# a regular expression of every trained run, for Snakemake's wildcard constraints
TRAINED_RUNS = "(?:" + "|".join(TRAINED) + r")(?:_seed\d+)?"
