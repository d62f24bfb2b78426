"""The models' records and the one way every module tells trained from pretrained and NoPE from RoPE."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from causalpos.catalogue.models import (
    KINDS,
    NOPE,
    PRETRAINED_KIND,
    ROPE,
    TRAINED,
    TRAINED_KIND,
    TRAINED_LABELS,
    TRAINED_MODELS,
    is_nope,
    is_trained,
    kind_of,
    label,
    model_labels,
    ordered,
    parse_run,
    seed_run,
    trained_model,
    uses_rope,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "causalpos"
DEFAULT_RUN = {
    "nope": (TRAINED_KIND, True, False),
    "rope": (TRAINED_KIND, False, True),
    "smollm2_135m": (PRETRAINED_KIND, False, False),
    "gemma3_270m": (PRETRAINED_KIND, False, False),
}


@pytest.mark.parametrize("name", DEFAULT_RUN)
def test_the_default_runs_models(name):
    kind, nope, rope = DEFAULT_RUN[name]
    assert kind_of(name) == kind and is_trained(name) == (kind == TRAINED_KIND)
    assert is_nope(name) == nope
    if is_trained(name):
        assert uses_rope(name) == rope


@pytest.mark.parametrize(
    "run, model, seed", [("nope", "nope", None), ("rope_seed3", "rope", 3), ("nope_seed12", "nope", 12)]
)
def test_seed_runs_are_their_models(run, model, seed):
    assert parse_run(run) == (model, seed) and seed_run(model, seed) == run
    assert is_trained(run) and is_nope(run) == (model == NOPE) and trained_model(run) is TRAINED_MODELS[model]


@pytest.mark.parametrize("name", ["my_nope", "nope2", "NoPE", "nope_seed", "rope_seedx", "llama_seed1", ""])
def test_a_name_containing_nope_is_not_the_trained_model(name):
    """Once a name containing "nope" counted as the NoPE model (claims); now only the trained runs do."""
    assert not is_trained(name) and not is_nope(name) and kind_of(name) == PRETRAINED_KIND
    assert trained_model(name) is None
    with pytest.raises(ValueError, match="not a trained run"):
        parse_run(name)


def test_the_records():
    assert TRAINED == (NOPE, ROPE) and set(KINDS) == {TRAINED_KIND, PRETRAINED_KIND}
    assert TRAINED_LABELS == {"nope": "NoPE", "rope": "RoPE"}
    assert [m.rope for m in TRAINED_MODELS.values()] == [False, True]
    assert all(m.kind == TRAINED_KIND and m.name == key for key, m in TRAINED_MODELS.items())
    with pytest.raises(ValueError, match="unknown trained model"):
        seed_run("smollm2_135m", 1)


def test_labels_come_from_the_config_then_the_records_then_the_key():
    labels = model_labels({"smol": "SmolLM2-135M"})
    assert labels == {"nope": "NoPE", "rope": "RoPE", "smol": "SmolLM2-135M"}
    assert label("smol", labels) == "SmolLM2-135M" and label("rope") == "RoPE" and label("other") == "other"
    assert label("nope", {"nope": "ours"}) == "ours"


def test_figures_list_trained_models_first_then_by_name():
    assert ordered(["zeta", "rope", "alpha", "nope", "rope"]) == ["nope", "rope", "alpha", "zeta"]
    assert ordered([]) == []


def test_figures_colour_trained_models_by_record_and_others_from_the_palette():
    import seaborn as sns

    from causalpos.catalogue.models import PRETRAINED_PALETTE
    from causalpos.figures.style import model_colours, model_label

    colours = model_colours(["nope", "smol", "rope", "gemma"])
    assert colours["nope"] == "tab:red" and colours["rope"] == "tab:blue"
    assert [colours["smol"], colours["gemma"]] == sns.color_palette(PRETRAINED_PALETTE, 2)
    assert model_label("nope") == "NoPE" and model_label("smol", {"model_labels": {"smol": "S"}}) == "S"


# a test of a model's name against "nope" or "rope" outside the catalogue: what catalogue.models is for (a
# simulation variant's `pe` == "rope" is a positional encoding, not a model)
COMPARED = re.compile(r"""([\w.\[\]"']+)\s*(?:==|!=)\s*["'](?:nope|rope)["']""")
CONTAINS = re.compile(r"""["'](?:nope|rope)["']\s+(?:not\s+)?in\b|\bin\s*\(\s*["']nope["']\s*,\s*["']rope["']""")
POSITIONAL_ENCODING = re.compile(r"""(?:^|\.|\[["'])pe["'\]]*$""")


def name_tests(code: str) -> bool:
    compared = [m.group(1) for m in COMPARED.finditer(code)]
    return bool(CONTAINS.search(code)) or any(not POSITIONAL_ENCODING.search(left) for left in compared)


def test_the_name_test_finds_what_it_should():
    assert (
        name_tests('if model == "rope":')
        and name_tests("x = 'nope' in name")
        and name_tests('if m in ("nope", "rope"):')
    )
    assert not name_tests('if v.pe == "rope":') and not name_tests('if p["pe"] == "rope":')
    assert not name_tests('Variant(pe="rope")')


def test_no_module_matches_model_names_itself():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative.parts[0] == "catalogue":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if name_tests(line.split("#", 1)[0]):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert found == []
