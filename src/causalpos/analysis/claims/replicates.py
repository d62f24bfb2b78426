"""The ledger's inputs as stacks of replicates: the tables indexed once, packed, and resampled.

Simulations get a bootstrap over groups of sample blocks (the simulation_groups tables: the engine's score sums
per group of consecutive seeded blocks), trained and pretrained models a bootstrap over groups of sequences (the
extraction's groups table): either way whole groups are drawn with replacement, so a metric's spread over the
replicates carries the correlation between the entries of one sample or sequence. See catalogue's docstring.
"""

from __future__ import annotations

import copy
import math
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalpos.analysis.triangles import COLUMN_CHUNK, pack
from causalpos.catalogue.models import DOCUMENTS
from causalpos.io import PartTable
from causalpos.catalogue.tables import require_columns
from causalpos.tril import packed_size

PAPER_D = 64  # the paper's hidden size; the reference d where several d share the other parameters
SIM_PARAMS = ["norm", "scale", "alpha", "pe", "rope_theta", "mask", "residual", "d", "seq_len", "n_layers"]
# The input law, from the tables' optional `sampler` column: "official" (the paper's construction, Section 4.1,
# the default) is law "official"; "exact_full" and "exact_reduced" (and a Variant's "exact"; before issue 23
# "full", "reduced", "auto") are two samplers of our exact-moment law (unit norm, E<x_i, x_j> = alpha exactly),
# law "exact", the robustness check. No column: the main law. With SIM_PARAMS the law identifies a variant, so a
# variant and its exact-law twin are two settings.
MAIN_LAW = "official"
LAWS = {name: "exact" for name in ("exact", "exact_full", "exact_reduced", "auto", "full", "reduced")}
VARIANT_KEYS = SIM_PARAMS + ["law"]
# the columns each input table must have
SIM_NEEDS = ["variant", "layer", "query_pos", "key_pos", "score_mean", "score_sem"] + SIM_PARAMS
THEORY_NEEDS = ["alpha", "residual", "query_pos", "key_pos", "score"]
SCORE_NEEDS = ["model", "kind", "layer", "query_pos", "key_pos", "score_mean", "score_sem", "seq_len"]
INTERMEDIATE_NEEDS = ["model", "layer", "stage", "query_pos", "key_pos", "value", "seq_len"]
GROUP_NEEDS = ["model", "quantity", "stage", "layer", "group", "n_sequences", "seq_len", "sums"]
SIM_GROUP_NEEDS = ["variant", "layer", "group", "n_samples", "seq_len", "sums"]
WINDOW_TEST_NEEDS = [
    "model",
    "source",
    "arm",
    "seq_len",
    "n_sequences",
    "n_groups",
    "layer",
    "layer_type",
    "window",
    "region",
    "query_from",
    "query_to",
    "measured",
    "uncertainty",
    "predicted",
    "replicates",
]
RECURSION_NEEDS = ["variant", "layer", "query_pos", "key_pos", "score", "concentrates", "corrected", "score_corrected"]
# claim 11 (ablation_claims): the pattern ablation's rows (pattern_ablation.ABLATION_COLUMNS)
ABLATION_NEEDS = ["model", "kind", "seed", "factor", "seq_len", "condition", "gap", "effect", "effect_sem"]


def debias(values: np.ndarray) -> np.ndarray:
    """Shift [estimate, replicates...] by the bootstrap bias (mean of the replicates - estimate)."""
    reps = values[1:]
    finite = reps[np.isfinite(reps)]
    if finite.size < 2 or not np.isfinite(values[0]):
        return values
    return values - (finite.mean() - values[0])


def amplitude(values: np.ndarray) -> np.ndarray:
    """sqrt of a bias-corrected variance share, clipped at 0 (an RMS ratio)."""
    return np.sqrt(np.clip(debias(values), 0.0, None))


def estimate(values: np.ndarray) -> tuple[float, float]:
    """(estimate, SD of the replicates); NaN SD where fewer than half the replicates are finite."""
    values = np.asarray(values, dtype=float)
    reps = values[1:]
    finite = reps[np.isfinite(reps)]
    se = float(finite.std(ddof=1)) if finite.size >= max(2, reps.size / 2) else math.nan
    return float(values[0]), se


def law_of(sampler: pd.Series) -> pd.Series:
    """The input law of each sampler value (see LAWS); missing values are the main law."""
    return sampler.map(lambda s: LAWS.get(str(s).strip().lower(), MAIN_LAW) if isinstance(s, str) else MAIN_LAW)


def find_twins(params: pd.DataFrame) -> dict:
    """{main-law variant: exact-law variant with the same SIM_PARAMS} (the first by name where several)."""
    twins = {}
    exact = params[params["law"] != MAIN_LAW]
    for variant, p in params[params["law"] == MAIN_LAW].iterrows():
        same = np.ones(len(exact), dtype=bool)
        for column in SIM_PARAMS:
            values = exact[column].to_numpy()
            same &= np.isclose(values.astype(float), float(p[column])) if column == "alpha" else values == p[column]
        if same.any():
            twins[variant] = str(min(exact.index[same]))
    return twins


def seeded_rng(seed: int, *parts) -> np.random.Generator:
    return np.random.default_rng([seed] + [zlib.crc32(str(p).encode()) for p in parts])


@dataclass
class Field:
    """One [S, S] quantity as x [P, 1 + R]: column 0 the estimate, then its replicates (packed lower triangle)."""

    x: np.ndarray
    size: int
    source: str
    groups: int | None = None  # the groups of sequences its bootstrap draws (None: replicates of another kind)

    @property
    def df(self) -> int | None:
        """The degrees of freedom of its standard error: G - 1 for a bootstrap over G groups of sequences, whose
        rows the ledger refers to Student's t (None: the normal)."""
        return self.groups - 1 if self.groups and self.groups > 1 else None


def stack(point: np.ndarray, replicates) -> np.ndarray:
    """[P] estimate and [P, R] replicates as one [P, 1 + R] float64 array. The replicates may come as ([P, R]
    sums, [R] divisors), or as ([P, G] group sums, [G, R] draws, [R] divisors): then the sums of the drawn
    groups are formed COLUMN_CHUNK replicates at a time, straight into the result (no [P, R] product beside it)."""
    if isinstance(replicates, tuple) and len(replicates) == 3:
        group_sums, draws, divisors = replicates
        x = np.empty((point.size, draws.shape[1] + 1))
        for start in range(0, draws.shape[1], COLUMN_CHUNK):
            end = min(start + COLUMN_CHUNK, draws.shape[1])
            np.divide(
                group_sums @ draws[:, start:end],
                divisors[None, start:end].astype(group_sums.dtype),
                out=x[:, 1 + start : 1 + end],
            )
    elif isinstance(replicates, tuple):
        sums, divisors = replicates
        x = np.empty((point.size, sums.shape[1] + 1))
        np.divide(sums, divisors[None, :].astype(sums.dtype), out=x[:, 1:])
    else:
        x = np.empty((point.size, replicates.shape[1] + 1))
        x[:, 1:] = replicates
    x[:, 0] = point
    return x


def list_matrix(column: pd.Series, dtype=np.float64) -> np.ndarray:
    """A column of equal-length float lists (object arrays or Arrow lists) as a [rows, length] array."""
    values = column.array
    if hasattr(values, "_pa_array"):  # pandas ArrowExtensionArray: flatten the list array without Python objects
        import pyarrow as pa

        chunked = values._pa_array.combine_chunks() if hasattr(values._pa_array, "combine_chunks") else values._pa_array
        if isinstance(chunked, (pa.ListArray, pa.LargeListArray)) and chunked.null_count == 0:
            flat = chunked.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
            lengths = np.diff(chunked.offsets.to_numpy())
            if len(set(lengths.tolist())) == 1:
                return flat.reshape(len(column), -1)
    rows = [np.asarray(v, dtype=dtype) for v in column]
    if len({r.size for r in rows}) != 1:
        raise ValueError("groups table: sums of different lengths within one quantity")
    return np.stack(rows)


def split_by(frame, keys):
    """{key tuple: rows} of a DataFrame, or of an io.PartTable read a part at a time when asked for."""
    if isinstance(frame, PartTable):
        return frame.parts(keys)
    return {key if isinstance(key, tuple) else (key,): rows for key, rows in frame.groupby(keys, sort=True)}


def model_kinds(table) -> dict:
    """{model: kind} of a DataFrame or an io.PartTable that has both columns."""
    if table is None or "kind" not in table.columns:
        return {}
    if isinstance(table, PartTable):
        pairs = table.keys(["model", "kind"])
    else:
        pairs = table[["model", "kind"]].drop_duplicates().itertuples(index=False)
    return {str(m): str(k) for m, k in pairs}


def group_sizes(groups) -> pd.Series:
    """Sequences per group of a groups table's score rows (a DataFrame or an io.PartTable), by group number."""
    if isinstance(groups, PartTable):
        rows = groups.select(quantity="scores").keys(["group", "n_sequences"])
        return pd.Series([n for _, n in rows], index=[g for g, _ in rows]).groupby(level=0).first().sort_index()
    return groups[groups["quantity"] == "scores"].groupby("group")["n_sequences"].first().sort_index()


def longest_seq_len(scores) -> int:
    """The largest seq_len of a scores table (a DataFrame or an io.PartTable)."""
    if isinstance(scores, PartTable):
        return max(int(n) for (n,) in scores.keys(["seq_len"]))
    return int(scores["seq_len"].max())


class LedgerInputs:
    """The tables, indexed once, and their replicates (drawn on first use and kept). The scores and groups
    tables may be io.PartTables: a model's layer is then read when a claim asks for it, so memory does not grow
    with the number of layers."""

    def __init__(
        self,
        simulations,
        theory,
        scores,
        intermediates,
        groups,
        n_bootstrap,
        seed,
        simulation_groups=None,
        recursion=None,
        window_test=None,
        pattern_ablation=None,
        controls=None,
        stream="",
    ):
        self.n_bootstrap, self.seed = n_bootstrap, seed
        # `stream`: a name that joins the seed of the bootstrap draws ("": none), so that inputs of another condition
        # (a content control's sequences, issue 43) draw their groups independently of the documents' under the same
        # model name; `controls`: condition -> its (scores, groups), each measured with its condition as stream
        self.stream = str(stream)
        self.controls = {
            condition: LedgerInputs.of_condition(condition, scores, groups, n_bootstrap, seed)
            for condition, (scores, groups) in (controls or {}).items()
        }
        self.sim = require_columns(simulations, SIM_NEEDS, "simulations", optional=True)
        sim_groups = require_columns(simulation_groups, SIM_GROUP_NEEDS, "simulation_groups", optional=True)
        self._sim_groups = split_by(sim_groups, ["variant", "layer"]) if sim_groups is not None else {}
        self.theory = require_columns(theory, THEORY_NEEDS, "theory", optional=True)
        self.recursion = require_columns(recursion, RECURSION_NEEDS, "recursion", optional=True)
        self._recursion = split_by(self.recursion, ["variant", "layer"]) if self.recursion is not None else {}
        self.window_test = require_columns(window_test, WINDOW_TEST_NEEDS, "window_test", optional=True)
        self.pattern_ablation = require_columns(pattern_ablation, ABLATION_NEEDS, "pattern_ablation", optional=True)
        self.scores = require_columns(scores, SCORE_NEEDS, "scores", optional=True)
        self.intermediates = require_columns(intermediates, INTERMEDIATE_NEEDS, "intermediates", optional=True)
        self.groups = require_columns(groups, GROUP_NEEDS, "groups", optional=True)
        self._sim = split_by(self.sim, ["variant", "layer"]) if self.sim is not None else {}
        self._scores = split_by(self.scores, ["model", "layer"]) if self.scores is not None else {}
        self._inter = split_by(self.intermediates, ["model", "stage"]) if self.intermediates is not None else {}
        self._groups = {}
        if isinstance(self.groups, PartTable):  # a missing stage reads as "" there
            self._groups = split_by(self.groups, ["model", "quantity", "stage", "layer"])
        elif self.groups is not None:
            stage = self.groups["stage"].astype(object).where(self.groups["stage"].notna(), "").astype(str)
            self._groups = split_by(self.groups.assign(stage=stage), ["model", "quantity", "stage", "layer"])
        self._kinds = {**model_kinds(self.groups), **model_kinds(self.scores)}
        self._counts = {}
        self._cache = {}
        self.first_groups = None  # first_groups_view: the models measured on their first groups only
        self.params = self.all_params = self.windowed_params = None
        self.twins = {}  # main-law variant -> its exact-law twin
        self.windows = {}  # variant -> its sliding window (None: every earlier key visible)
        self._identity = {}
        if self.sim is not None:
            first = self.sim.drop_duplicates("variant").set_index("variant")
            params = first[SIM_PARAMS].copy()
            params["residual"] = params["residual"].astype(bool)
            params["alpha"] = params["alpha"].astype(float).round(9)
            params["n_layers"] = self.sim.groupby("variant")["layer"].max().reindex(params.index) + 1
            # replicates are seeded by a variant's parameters, not its name: renaming changes no number (the
            # law joins the identity only when it is not the main one)
            extra = [c for c in ("n_samples", "seed") if c in self.sim.columns]
            params["law"] = law_of(first["sampler"]) if "sampler" in first.columns else MAIN_LAW
            for v in params.index:
                ident = tuple(params.loc[v, SIM_PARAMS].tolist()) + tuple(first.loc[v, extra].tolist())
                if params.loc[v, "law"] != MAIN_LAW:
                    ident += (params.loc[v, "law"],)
                self._identity[v] = repr(ident)
            # a sliding window (issue 25) makes another decoder than the paper's: windowed variants are not
            # settings of the paper's claims (an older table without the column has none)
            windowed = first["window"].notna() if "window" in first.columns else pd.Series(False, first.index)
            self.windows = {v: int(first.loc[v, "window"]) if windowed[v] else None for v in first.index}
            self.windowed_params = params[windowed.reindex(params.index).to_numpy()].sort_index()
            params = params[~windowed.reindex(params.index).to_numpy()]
            self.all_params = params.sort_index()
            self.twins = find_twins(self.all_params)
            # the ledger's settings: every main-law variant, and exact-law ones that have no main-law twin
            self.params = self.all_params.drop(index=list(self.twins.values()))

    @classmethod
    def of_condition(cls, condition: str, scores, groups, n_bootstrap: int, seed: int) -> "LedgerInputs":
        """One condition's pretrained tables (issue 43): the documents draw the default ledger's groups (so their
        numbers are claim 8's), a content control its own (its name is the stream), independent of them."""
        return cls(
            None, None, scores, None, groups, n_bootstrap, seed, stream="" if condition == DOCUMENTS else condition
        )

    def view(self, params: pd.DataFrame) -> "LedgerInputs":
        """The same inputs (and caches) with another set of simulation variants to choose settings from."""
        other = copy.copy(self)
        other.params = params
        return other

    def first_groups_view(self, k: int) -> "LedgerInputs":
        """The same inputs with every model measured on its first `k` groups of sequences alone: the estimate is
        their sums over their numbers of sequences, the bootstrap draws k of them (the convergence table)."""
        other = copy.copy(self)
        other.first_groups, other._counts, other._cache = int(k), {}, {}
        return other

    def twin_view(self) -> "LedgerInputs":
        """The settings with every main-law variant that has an exact-law twin replaced by the twin."""
        params = self.params.drop(index=list(self.twins))
        twins = list(dict.fromkeys(self.twins.values()))
        return self.view(pd.concat([params, self.all_params.loc[twins]]).sort_index())

    # -- simulations: a bootstrap over groups of sample blocks

    def sim_field(self, variant: str, layer: int) -> Field | None:
        """One layer's mean scores of a variant with their replicates: the groups of sample blocks drawn with
        replacement (one set of draws per variant, shared by its layers), replicate = the drawn groups' score
        sums over their samples. Without a simulation_groups table (tables of another tool, older runs): the
        parametric replicates score_mean + score_sem * N(0, 1), entry by entry, which treat the entries as
        independent and so understate the spread of a metric over many entries (the field's `source` says)."""
        key = ("sim", variant, layer)
        if key not in self._cache:
            rows = self._sim.get((variant, layer))
            field = None
            if rows is not None:
                size = int(rows["seq_len"].max())
                mean, sem = pack(rows, ["score_mean", "score_sem"], size)
                groups = self._sim_groups.get((variant, layer))
                if groups is not None:
                    groups = groups.sort_values("group")
                    sums = list_matrix(groups["sums"])
                    if sums.shape[1] != packed_size(size):
                        raise ValueError(
                            f"simulation_groups, variant {variant!r}: sums of length {sums.shape[1]}, "
                            f"expected S(S+1)/2 = {packed_size(size)} for seq_len {size}"
                        )
                    counts = self.group_counts(("sim", self._identity[variant]), len(groups))
                    reps = (sums.T @ counts, groups["n_samples"].to_numpy(float) @ counts)
                    field = Field(stack(mean, reps), size, "bootstrap over groups of Monte Carlo sample blocks")
                else:
                    z = seeded_rng(self.seed, "sim", self._identity[variant], layer).standard_normal(
                        (mean.size, self.n_bootstrap)
                    )
                    field = Field(
                        stack(mean, mean[:, None] + np.nan_to_num(sem, nan=0.0)[:, None] * z),
                        size,
                        "no simulation_groups table: parametric replicates from score_sem",
                    )
            self._cache[key] = field
        return self._cache[key]

    def recursion_scores(self, variant: str, layer: int, size: int) -> tuple[np.ndarray, bool, bool] | None:
        """One layer of a variant as the large-d recursion predicts it (packed lower triangle, NaN where the
        table has no pair); whether that is the finite-d corrected prediction (l2, LayerNorm with d scaling)
        or the leading order; and whether the scores concentrate as d grows (not with LayerNorm and sqrt(d)
        scaling: then the leading order is a limit the simulation does not approach). None where the table has
        no such variant and layer."""
        rows = self._recursion.get((variant, layer))
        if rows is None:
            return None
        corrected = bool(rows["corrected"].all())
        (scores,) = pack(rows, ["score_corrected" if corrected else "score"], size)
        return scores, corrected, bool(rows["concentrates"].all())

    # -- models: bootstrap over groups of sequences

    def models(self, kind: str) -> list[str]:
        return sorted(m for m, k in self._kinds.items() if k == kind)

    def score_layers(self, model: str) -> list[int]:
        return sorted(int(layer) for (m, layer) in self._scores if m == model)

    def group_counts(self, model, n_groups: int) -> np.ndarray:
        """[G, R] times each group is drawn in each replicate (G draws with replacement); one set per model (or
        simulation variant: `model` = ("sim", its identity)), shared by its layers and stages."""
        key = (model, n_groups)
        if key not in self._counts:
            parts = ("bootstrap", model) if isinstance(model, str) else ("bootstrap",) + tuple(model)
            parts += (self.stream,) if self.stream else ()
            draws = seeded_rng(self.seed, *parts).integers(0, n_groups, size=(self.n_bootstrap, n_groups))
            counts = np.zeros((n_groups, self.n_bootstrap))
            np.add.at(counts, (draws.ravel(), np.repeat(np.arange(self.n_bootstrap), n_groups)), 1.0)
            self._counts[key] = counts
        return self._counts[key]

    def bootstrap(self, model, quantity, stage, layer, size) -> tuple | None:
        """Bootstrap replicates of one quantity as ([P, G] sums of each group, [G, R] times each group is drawn,
        [R] the drawn groups' numbers of sequences): `stack` makes the replicates of them. None where the groups
        table lacks the quantity."""
        if layer is None:  # intermediates: the stage under whatever layer it was recorded
            hits = [k for k in self._groups if k[:3] == (model, quantity, stage)]
            rows = self._groups[min(hits, key=lambda k: k[3])] if hits else None
        else:
            rows = self._groups.get((model, quantity, stage, layer))
        if rows is None:
            return None
        rows = self._first_groups(rows)
        label = f"groups table, model {model!r}, {quantity} {stage}".rstrip()
        if int(rows["seq_len"].max()) != size:
            raise ValueError(f"{label}: seq_len {int(rows['seq_len'].max())}, but {size} in the {quantity} table")
        sums = list_matrix(rows["sums"], np.float32)
        if sums.shape[1] != packed_size(size):
            raise ValueError(f"{label}: sums of length {sums.shape[1]}, expected S(S+1)/2 = {packed_size(size)}")
        n = rows["n_sequences"].to_numpy(float)
        counts = self.group_counts(model, len(rows))
        # the sums are float32 already: a float32 product is as exact and 5-10x faster than float64 here;
        # `stack` forms it a chunk of replicates at a time
        return np.ascontiguousarray(sums.T, dtype=np.float32), counts.astype(np.float32), (n @ counts)

    def _first_groups(self, rows: pd.DataFrame) -> pd.DataFrame:
        """One quantity's group rows in group order: all of them, or the first `first_groups`."""
        rows = rows.sort_values("group")
        return rows if self.first_groups is None else rows.iloc[: self.first_groups]

    def score_field(self, model: str, layer: int) -> Field | None:
        """One layer's scores of a model; not kept (a pretrained model's layers are ~50 MB each at S = 256)."""
        rows = self._scores.get((model, layer))
        if rows is None:
            return None
        size = int(rows["seq_len"].max())
        mean, sem = pack(rows, ["score_mean", "score_sem"], size)
        if self.first_groups is not None:  # the mean of the first groups' sequences, from their sums
            groups = self._groups.get((model, "scores", "", layer))
            if groups is None:
                raise ValueError(f"model {model!r}: no groups table, so no measure on its first groups")
            groups = self._first_groups(groups)
            mean = list_matrix(groups["sums"]).sum(axis=0) / groups["n_sequences"].sum()
        reps = self.bootstrap(model, "scores", "", layer, size)
        source, groups = "bootstrap over groups of sequences", None if reps is None else reps[1].shape[0]
        if reps is None:
            z = seeded_rng(self.seed, "score", model, layer).standard_normal((mean.size, self.n_bootstrap))
            reps = mean[:, None] + np.nan_to_num(sem, nan=0.0)[:, None] * z
            source = "no groups table: parametric replicates from score_sem"
        return Field(stack(mean, reps), size, source, groups)

    def intermediate_field(self, model: str, stage: str) -> tuple[Field | None, int | None]:
        """Stage `stage` of Figure 3 for `model` (the lowest layer it was recorded under) and that layer."""
        key = ("inter", model, stage)
        if key not in self._cache:
            rows = self._inter.get((model, stage))
            field, layer = None, None
            if rows is not None:
                layer = int(rows["layer"].min())
                rows = rows[rows["layer"] == layer]
                size = int(rows["seq_len"].max())
                (value,) = pack(rows, ["value"], size)
                if self.first_groups is not None:  # as score_field: the first groups' mean, from their sums
                    hits = [k for k in self._groups if k[:3] == (model, "intermediate", stage)]
                    groups = self._first_groups(self._groups[min(hits, key=lambda k: k[3])]) if hits else None
                    value = (
                        list_matrix(groups["sums"]).sum(axis=0) / groups["n_sequences"].sum()
                        if groups is not None
                        else np.full(value.size, np.nan)
                    )
                reps = self.bootstrap(model, "intermediate", stage, None, size)
                source, groups = "bootstrap over groups of sequences", None if reps is None else reps[1].shape[0]
                if reps is None:
                    reps = np.full((value.size, self.n_bootstrap), np.nan)
                    source = "no groups table for this stage"
                field = Field(stack(value, reps), size, source, groups)
            self._cache[key] = (field, layer)
        return self._cache[key]
