"""The models: the two this project trains, how a pretrained model is named and coloured, and the names of runs.

Section 4.2's pair: a decoder without positional encoding (`nope`) and its RoPE twin (`rope`), trained with
`training.seed`. The same training with another seed of `evaluation.seeds` (the comparison over seeds, target
length_seeds) is a run of its own, named `<model>_seed<seed>` (`nope_seed1`): its folder, its rule jobs and its
rows say which model and seed it is. Any other model name is a pretrained model (`extraction.pretrained.models`).

TRAINED_MODELS holds a record per trained model: its label in figures, its colour, its kind. A pretrained model's
label is the config's `label:`, else what models.pretrained.model_label finds (an embedded model's name, the
Hugging Face id's last part), else its key; the figures get the labels as options["model_labels"]. Its colour is
from PRETRAINED_PALETTE, by its place among the other models a figure draws (figures.style.model_colours).

Every module tells trained from pretrained and NoPE from RoPE with is_trained / kind_of / is_nope / uses_rope,
never by matching the names itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRAINED_KIND, PRETRAINED_KIND = "trained", "pretrained"  # the `kind` column of the tables
KINDS = (TRAINED_KIND, PRETRAINED_KIND)

# the pretrained models' sequences under the content controls of issue 43 (corpus.conditions: what each is); the
# first is Section 5.2's, the default run's own extraction; the others each have an extraction of their own
DOCUMENTS = "documents"  # the default run's sequences: each a document's start, after BOS
CONDITIONS = (DOCUMENTS, "mid_document", "random_tokens", "shuffled_documents")
CONTROL_CONDITIONS = CONDITIONS[1:]
# a sliding-window model's two extractions on the same sequences (target window_control, issue 43): its windows as
# trained, and lifted (every layer global, each keeping its RoPE base: an out-of-distribution control)
WINDOW_ARMS = ("windowed", "lifted")
WINDOWED, LIFTED = WINDOW_ARMS
DIFFERENCE = "difference"  # the window test's arm of the window's own effect: windowed minus lifted
# three letters each: a condition in a tick label beside a model's name (the claims figure's labels are short)
CONDITION_CODES = dict(zip(CONDITIONS, ("doc", "mid", "rnd", "shf")))


@dataclass(frozen=True)
class Model:
    """A model's record: its key (the {model} wildcard, the tables' `model`), its name in figures, its colour (a
    matplotlib colour), its kind (KINDS) and whether it rotates queries and keys."""

    name: str
    label: str
    colour: str
    kind: str
    rope: bool


NOPE, ROPE = "nope", "rope"
TRAINED_MODELS = {
    NOPE: Model(NOPE, "NoPE", "tab:red", TRAINED_KIND, rope=False),  # no positional encoding (Section 4.2)
    ROPE: Model(ROPE, "RoPE", "tab:blue", TRAINED_KIND, rope=True),  # its twin with RoPE
}
PRETRAINED_PALETTE = "Dark2"  # seaborn palette of the other models' colours, in the order a figure lists them
TRAINED = tuple(TRAINED_MODELS)  # the NoPE decoder and its RoPE twin, in the order figures list them
ROPE_MODELS = tuple(name for name, model in TRAINED_MODELS.items() if model.rope)
TRAINED_LABELS = {name: model.label for name, model in TRAINED_MODELS.items()}
TRAINED_COLOURS = {name: model.colour for name, model in TRAINED_MODELS.items()}
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
        parse_run(str(name))
    except ValueError:
        return False
    return True


def uses_rope(run: str) -> bool:
    """Whether a trained run rotates queries and keys."""
    return parse_run(run)[0] in ROPE_MODELS


# a regular expression of every trained run, for Snakemake's wildcard constraints
TRAINED_RUNS = "(?:" + "|".join(TRAINED) + r")(?:_seed\d+)?"


def kind_of(name: str) -> str:
    """ "trained" for a trained model or one of its seed runs, else "pretrained"."""
    return TRAINED_KIND if is_trained(name) else PRETRAINED_KIND


def is_nope(name: str) -> bool:
    """Whether `name` is the trained NoPE model or one of its seed runs (a pretrained model is not)."""
    return is_trained(name) and not uses_rope(name)


def trained_model(name: str) -> Model | None:
    """The record of a trained model or seed run (nope_seed1: nope's); None for a pretrained model."""
    return TRAINED_MODELS[parse_run(name)[0]] if is_trained(name) else None


def label(name: str, labels: dict | None = None) -> str:
    """A model's name in figures: `labels`' (the figures' options["model_labels"]: the config's pretrained
    models), else a trained model's record's, else its key."""
    return (labels or {}).get(name) or TRAINED_LABELS.get(name, name)


def model_labels(pretrained: dict[str, str]) -> dict[str, str]:
    """Every model's label by key: the trained models' and `pretrained` {key: label} (models.pretrained.model_label
    of each configured model)."""
    return {**TRAINED_LABELS, **pretrained}


def ordered(models) -> list:
    """The trained models first, in TRAINED's order, then the others by name: the order figures list models."""
    models = list(dict.fromkeys(models))
    trained = [m for m in TRAINED if m in models]
    return trained + sorted(m for m in models if m not in trained)
