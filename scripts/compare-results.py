"""Compare every Parquet table of two results folders, value by value.

    python scripts/compare-results.py BEFORE/results AFTER/results

Prints one line per table: `same` (every column and value equal, float bits included, NaN equal to NaN),
or the columns whose values differ, with the largest absolute difference of each numeric one; and the
tables found in one folder only. The tables' metadata (run times, versions) is not compared. Exits 1
unless every table is the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd


def differing_columns(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, str]:
    """Column -> how it differs; empty if the frames are equal."""
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return {"<shape>": f"{a.shape} {list(a.columns)} vs {b.shape} {list(b.columns)}"}
    found = {}
    for column in a.columns:
        x, y = a[column].reset_index(drop=True), b[column].reset_index(drop=True)
        if x.dtype != y.dtype:
            found[column] = f"dtype {x.dtype} vs {y.dtype}"
        elif x.map(repr).equals(y.map(repr)) if x.dtype == object else x.equals(y):
            continue
        elif pd.api.types.is_numeric_dtype(x.dtype) and not pd.api.types.is_bool_dtype(x.dtype):
            found[column] = f"max |difference| {np.nanmax(np.abs(x.to_numpy(float) - y.to_numpy(float))):.3g}"
        else:  # text (a verdict), booleans, objects (lists, arrays in a cell) compare by their repr
            found[column] = f"{int((x.map(repr) != y.map(repr)).sum())} values differ"
    return found


def main(before: str, after: str) -> int:
    left = {p.relative_to(before) for p in Path(before).rglob("*.parquet")}
    right = {p.relative_to(after) for p in Path(after).rglob("*.parquet")}
    same = True
    for name in sorted(left | right):
        if name not in left or name not in right:
            print(f"{name}: only in {before if name in left else after}")
            same = False
            continue
        diff = differing_columns(pd.read_parquet(Path(before) / name), pd.read_parquet(Path(after) / name))
        print(f"{name}: " + ("same" if not diff else "; ".join(f"{c}: {how}" for c, how in diff.items())))
        same &= not diff
    print(f"{len(left & right)} tables in both folders")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
