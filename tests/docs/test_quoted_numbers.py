"""Numbers the README, docs/claims.md, models.md and engine.md quote from the default run are the tables' (issue 41,
part 6).

The default run's ledger and convergence table are committed under docs/tables/default_run/ (written by
scripts/update-docs-claims.py from a finished run). Each entry of QUOTES computes, from those tables, a phrase
that a page must contain (whitespace-insensitive: the pages wrap lines anywhere). A rerun that moves a number
fails here until the page says the new one; the failure prints the phrase as it should read. The README's
findings table is checked against the ledger's verdicts (test_readme_findings_agree_with_the_ledger)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "docs" / "tables" / "default_run"
CLAIMS_MD = ROOT / "docs" / "claims.md"
MODELS_MD = ROOT / "docs" / "models.md"
ENGINE_MD = ROOT / "docs" / "engine.md"
README = ROOT / "README.md"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def ledger() -> pd.DataFrame:
    return pd.read_parquet(TABLES / "claims.parquet")


def convergence() -> pd.DataFrame:
    return pd.read_parquet(TABLES / "convergence.parquet")


def one(table: pd.DataFrame, claim: str, setting: str) -> pd.Series:
    """The ledger row of `claim` whose setting contains `setting` (exactly one)."""
    rows = table[(table["claim_id"] == claim) & table["setting"].str.contains(setting, regex=False)]
    assert len(rows) == 1, f"{claim} {setting!r}: {len(rows)} rows"
    return rows.iloc[0]


def count(table: pd.DataFrame, claim: str, verdict: str, setting: str = "") -> int:
    rows = table[(table["claim_id"] == claim) & table["setting"].str.contains(setting, regex=False)]
    return int((rows["verdict"] == verdict).sum())


def layers(table: pd.DataFrame, claim: str, setting: str) -> int:
    return int(((table["claim_id"] == claim) & table["setting"].str.contains(setting, regex=False)).sum())


def note_number(row: pd.Series, pattern: str) -> str:
    """The first group of `pattern` in the row's note (a number as the ledger printed it)."""
    found = re.search(pattern, str(row["note"]))
    assert found, f"{row['claim_id']} {row['setting']!r}: no {pattern!r} in its note"
    return found.group(1)


def f2(x: float) -> str:
    return f"{x:.2f}"


def f3(x: float) -> str:
    return f"{x:.3f}"


def eq4(t):
    d = {d_: one(t, "1a", f"α=0, d={d_}")["value"] for d_ in (16, 32, 64)}
    return f"R² {f3(d[32])} at d = 32 and {f3(d[64])} at d = 64, but {f3(d[16])} at d = 16"


def cosine(t):
    values = [one(t, "2e", f"layer {k} (paper)")["value"] for k in (2, 3, 4)]
    return "cosine similarity at layers 2-4: " + ", ".join(f2(v) for v in values)


def strictly(t):
    rows = [one(t, "2c", f"l2, α=0, d=64, layer {k} (paper)") for k in (3, 4)]
    falling = [note_number(r, r"(\d+) violated") for r in rows]
    return f"{falling[0]} and {falling[1]} of the 48 rows fall over some keys"


def layernorm(t):
    parts = []
    for alpha in ("0", "0.2"):
        row = one(t, "5c", f"α={alpha}, d=64")
        ratios = re.findall(r"layer \d \(paper\) ([\d.]+)", str(row["note"]))
        parts.append(", ".join(ratios[:2]) + f" and {ratios[2]}")
    return f"{parts[0]} times l2's at layers 2, 3 and 4 at alpha = 0 and {parts[1]} at alpha = 0.2"


def nope(t):
    f, i = (one(t, "7a", stage)["value"] for stage in ("(f)", "(i)"))
    b = one(t, "7b", "(i)")["value"]
    return f"concordance {f2(f)} at (f) and {f3(i)} at (i); its layer-2 pattern is {b:.1f}x the alpha = 0 simulation's"


def later_layers(t):
    values = [one(t, "7n", f"layer {k} (paper)")["value"] for k in (3, 4)]
    return f"7n: {f2(values[0])} and {f2(values[1])}"


def llm_8a(t):
    parts = []
    for model, name in (("smollm2_135m", "SmolLM2-135M"), ("gemma3_270m", "Gemma-3-270M")):
        n = layers(t, "8a", model)
        parts.append(f"{count(t, '8a', 'supported', model)} of {name}'s {n} layers")
    return "not negligible (our 0.1) in " + " and ".join(parts)


def llm_8d(t):
    parts = []
    for model, name in (("smollm2_135m", "SmolLM2"), ("gemma3_270m", "Gemma")):
        n = layers(t, "8d", model)
        s, i, x = (count(t, "8d", v, model) for v in ("supported", "inconclusive", "not supported"))
        parts.append(f"{name}: {s} of {n} layers ({i} inconclusive, {x} not supported)")
    return "keys 1-4 above their diagonals in " + "; ".join(parts)


def llm_amplitudes(t):
    b = [one(t, "8b", model)["value"] for model in ("smollm2_135m", "gemma3_270m")]
    c = [one(t, "8c", model)["value"] for model in ("smollm2_135m", "gemma3_270m")]
    return f"8b {f2(b[0])} and {f2(b[1])}, 8c {f2(c[0])} and {f2(c[1])} (SmolLM2, Gemma)"


def small_n(t):
    conv = convergence()
    b = conv[conv["claim_id"] == "8b"].sort_values("n_sequences")
    parts = []
    for model, name in (("smollm2_135m", "SmolLM2"), ("gemma3_270m", "Gemma")):
        rows = b[b["model"] == model]
        values = ", ".join(f2(v) for v in rows["value"])
        ns = ", ".join(str(int(n)) for n in rows["n_sequences"])
        parts.append(f"{name} {values} at N = {ns}")
    return "8b: " + "; ".join(parts)


def convergence_flips(t):
    conv = convergence()
    rows = conv[conv["claim_id"].isin(["8a", "8d"])]
    flips = rows.groupby(["model", "claim_id", "layer"])["verdict"].nunique()
    return f"{int((flips > 1).sum())} of the {len(flips)} claim, model and layer rows of 8a and 8d"


def window(t):
    """claims.md's 10d-10e line: the default run's ledger has no lifted arm, so their rows have no value."""
    rows = t[t["claim_id"].isin(["10d", "10e"])]
    assert len(rows) == 2 and rows["value"].isna().all() and rows["note"].str.contains("target window_control").all()
    return "without target `window_control` their two rows have no value and say so"


def rope_left(t):
    v = [one(t, "6b", f"α=0, d=64, layer {k} (paper)")["verdict"] for k in (2, 3, 4)]
    signs = [one(t, "6b", f"α=0, d=64, layer {k} (paper)")["value"] for k in (2, 4)]
    assert signs[0] > 0 > signs[1], "the page says brighter at layer 2 and darker at layer 4"
    return (
        f"brighter than its diagonals at layer 2 ({v[0]}), the regions we name disagree at layer 3 ({v[1]}), "
        f"and it is darker at layer 4 ({v[2]})"
    )


def window_directions(t):
    """engine.md's Gemma sentence, from the committed paper-size window test (target paper_llms)."""
    w = pd.read_parquet(ROOT / "docs" / "tables" / "paper_llms_gemma" / "window_test.parquet")
    before, after = (w[w["region"] == r].set_index("layer") for r in ("before", "after"))
    measured, predicted = after["measured"] - before["measured"], after["predicted"] - before["predicted"]
    has = predicted.notna()
    same = int((np.sign(measured[has]) == np.sign(predicted[has])).sum())
    falls = int((measured[has] < 0).sum())
    r = np.corrcoef(measured[has], predicted[has])[0, 1]
    return (
        f"the direction of {same} of the {int(has.sum())} layers it predicts (not layers 4-6). That is no evidence "
        f'for it: a constant guess, "it falls", gets {falls} of {int(has.sum())}, and across layers the predicted and '
        f"measured changes correlate at r = {r:.2f}"
    )


def input_law(t):
    rows = t[t["claim_id"] == "9a"]
    same = int((rows["verdict"] == "supported").sum())
    return f"{same} of the {len(rows)} compared verdicts"


# name -> (page, the phrase it must contain, computed from the tables)
QUOTES = {
    "eq4": (CLAIMS_MD, eq4),
    "cosine": (CLAIMS_MD, cosine),
    "strictly": (CLAIMS_MD, strictly),
    "layernorm": (CLAIMS_MD, layernorm),
    "rope_left": (CLAIMS_MD, rope_left),
    "nope": (CLAIMS_MD, nope),
    "later_layers": (CLAIMS_MD, later_layers),
    "llm_8a": (CLAIMS_MD, llm_8a),
    "llm_8d": (CLAIMS_MD, llm_8d),
    "llm_amplitudes": (CLAIMS_MD, llm_amplitudes),
    "small_n": (CLAIMS_MD, small_n),
    "small_n_models": (MODELS_MD, small_n),
    "convergence_flips": (CLAIMS_MD, convergence_flips),
    "convergence_flips_models": (MODELS_MD, convergence_flips),
    "window": (CLAIMS_MD, window),
    "input_law": (CLAIMS_MD, input_law),
    "window_directions": (ENGINE_MD, window_directions),
    "window_directions_models": (MODELS_MD, window_directions),
}


@pytest.mark.parametrize("name", QUOTES)
def test_the_docs_quote_the_default_runs_numbers(name):
    page, phrase_of = QUOTES[name]
    phrase = phrase_of(ledger())
    assert flat(phrase) in flat(page.read_text()), f"{page.relative_to(ROOT)} should say: {phrase}"


def expand(claims: str) -> list[str]:
    """ "1a-1e, 2c" -> ["1a", ..., "1e", "2c"] (ranges within one claim number)."""
    out = []
    for part in (p.strip() for p in claims.split(",")):
        found = re.fullmatch(r"(\d+)([a-z])(?:-\1([a-z]))?", part)
        assert found, f"not a claim or range of claims: {part!r}"
        first, last = found.group(2), found.group(3) or found.group(2)
        out += [f"{found.group(1)}{chr(c)}" for c in range(ord(first), ord(last) + 1)]
    return out


def readme_findings() -> dict[str, list[str]]:
    rows = {}
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in ("holds", "does not, or not as printed", "not resolved"):
            rows[cells[0]] = cells[1]
    assert set(rows) == {"holds", "does not, or not as printed", "not resolved"}, rows
    return rows


def test_readme_findings_agree_with_the_ledger():
    """The README's short table: a claim under "holds" has every row on the paper's readings supported (tests and
    exact rows, ours apart); one under "does not" has at least one such row not supported; one under "not
    resolved" has at least one inconclusive and none not supported ("some of" claims: at least one inconclusive);
    and every claim with a row not supported on the paper's readings is under "does not"."""
    t = ledger()
    paper = t[t["row_kind"].isin(["test", "exact"]) & ~t["ours"].astype(bool)]
    rows = readme_findings()
    verdicts = {c: set(paper.loc[paper["claim_id"] == c, "verdict"]) for c in paper["claim_id"].unique()}
    settled = t[~t["ours"].astype(bool)]
    for claim in expand(rows["holds"]):
        found = set(settled.loc[settled["claim_id"] == claim, "verdict"])
        assert found and found <= {"supported", "by construction"}, f"README says {claim} holds; the ledger: {found}"
    failing = expand(rows["does not, or not as printed"])
    for claim in failing:
        assert "not supported" in verdicts.get(claim, set()), f"README says {claim} does not hold"
    unresolved = rows["not resolved"]
    some = re.search(r"some of (.*)$", unresolved)
    plain = unresolved[: some.start()].strip(" ,") if some else unresolved
    for claim in expand(plain):
        assert "inconclusive" in verdicts.get(claim, set()) and "not supported" not in verdicts[claim], claim
    for claim in expand(some.group(1)) if some else []:
        assert "inconclusive" in verdicts.get(claim, set()), claim
    assert {c for c, v in verdicts.items() if "not supported" in v} <= set(failing)


def test_the_content_controls_table_of_models_md_is_the_committed_tables():
    """docs/models.md's table of the content controls (issue 43): each cell is 8b's metric of that model and
    condition in docs/tables/mask_controls/mask_controls.parquet, as the page prints it."""
    table = pd.read_parquet(ROOT / "docs" / "tables" / "mask_controls" / "mask_controls.parquet")
    rows = table[(table["head"] == -1) & (table["layer"] == -1) & (table["metric"] == "nonrelative_amplitude")]
    conditions = ["documents", "mid_document", "random_tokens", "shuffled_documents"]
    page = flat(MODELS_MD.read_text())
    for model, label in (("smollm2_135m", "SmolLM2-135M"), ("gemma3_270m", "Gemma-3-270M")):
        cells = []
        for condition in conditions:
            (row,) = rows[(rows["model"] == model) & (rows["condition"] == condition)].itertuples()
            cells.append(f"{row.value:.3f} ± {row.uncertainty:.3f}")
        line = f"| {label} | " + " | ".join(cells) + " |"
        assert line in page, f"docs/models.md should read: {line}"


def test_the_claim_12_table_of_models_md_is_the_committed_ledger():
    """docs/models.md's table of claim 12 (issue 43): each line is the committed controls ledger's 12a and 12b rows
    of that model and control (docs/tables/mask_controls/claims.parquet, target mask_controls's), as printed."""
    table = pd.read_parquet(ROOT / "docs" / "tables" / "mask_controls" / "claims.parquet")
    page = flat(MODELS_MD.read_text())
    labels = {"smollm2_135m": "SmolLM2-135M", "gemma3_270m": "Gemma-3-270M"}
    lines = 0
    for model, label in labels.items():
        for condition in ("mid_document", "random_tokens", "shuffled_documents"):
            a = one(table[table["model"] == model], "12a", f", {condition} /")
            b = one(table[table["model"] == model], "12b", f", {condition},")
            line = (
                f"| {label} | {condition} | {a['value']:.2f} ± {a['uncertainty']:.2f} | {a['verdict']} | "
                f"{b['value']:+.2f} ± {b['uncertainty']:.2f} | {b['verdict']} |"
            )
            assert line in page, f"docs/models.md should read: {line}"
            lines += 1
    assert lines == 6


def test_the_windows_own_effect_in_models_md_is_the_committed_tables():
    """docs/models.md's account of target window_control (issue 43): the window's own effect by layer from the
    committed window test (arm difference), and claims 10d-10e from the ledger run after it, as the page words them."""
    folder = ROOT / "docs" / "tables" / "window_control"
    table = pd.read_parquet(folder / "window_test.parquet")
    effect = table[(table["arm"] == "difference") & (table["layer"] >= 1)].sort_values("layer")
    measured = effect["measured"].to_numpy()
    glob = effect.loc[effect["layer_type"] == "global", "measured"].to_numpy()
    ledger_rows = pd.read_parquet(folder / "claims.parquet")
    d = ledger_rows[ledger_rows["claim_id"] == "10d"].iloc[0]
    e = ledger_rows[ledger_rows["claim_id"] == "10e"].iloc[0]
    share = note_number(e, r"sign in (\d+%)")
    page = flat(MODELS_MD.read_text())
    phrases = [
        f"negative in {int((measured < 0).sum())} of {len(measured)} layers, from {measured.max():.3f} to "
        f"{measured.min():.3f} of the score RMS, the global layers' included ("
        + ", ".join(f"{v:.3f}" for v in glob)
        + ")",
        f"r = {d['value']:.2f} ± {d['uncertainty']:.2f} ({d['reference']}, > 0.5 needed), and it names the sign in "
        f"{share} of the layers",
        f"(10d, 10e: {d['verdict']})" if d["verdict"] == e["verdict"] else "10d and 10e disagree",
    ]
    for phrase in phrases:
        assert flat(phrase) in page, f"docs/models.md should say: {phrase}"
