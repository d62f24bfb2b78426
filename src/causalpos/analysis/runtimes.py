"""How long each expensive job took: one table for the report and for pandas.

Two sources, because Snakemake allows no `benchmark:` on a rule cached between
workflows (`cache: True`): the benchmark files of the uncached rules (train:
wall time and peak memory as Snakemake measured them) and the run time each
cached stage stores in its Parquet metadata (simulate, extract: the time of
the computation itself, also when the file later comes from the cache).
"""

from __future__ import annotations

import os

import pandas as pd

from causalpos.io import read_metadata

RUNTIME_COLUMNS = ["rule", "job", "seconds", "max_rss_mb", "cpu_seconds", "device", "source"]


def _job_name(path) -> str:
    return os.path.splitext(os.path.basename(str(path)))[0]


def runtime_frame(benchmarks: dict, parquets: dict) -> pd.DataFrame:
    """`benchmarks`: rule -> benchmark .tsv files; `parquets`: rule -> Parquet files with `seconds` metadata."""
    rows = []
    for rule, paths in benchmarks.items():
        for path in paths:
            bench = pd.read_csv(path, sep="\t")
            for _, run in bench.iterrows():  # one row per repeat of the benchmark
                rows.append({"rule": rule, "job": _job_name(path), "seconds": float(run["s"]),
                             "max_rss_mb": float(run["max_rss"]), "cpu_seconds": float(run["cpu_time"]),
                             "device": None, "source": "benchmark"})
    for rule, paths in parquets.items():
        for path in paths:
            meta = read_metadata(path)
            if "seconds" not in meta:
                raise ValueError(f"{path} has no run time in its metadata (not written by the {rule} stage?)")
            rows.append({"rule": rule, "job": meta.get("variant") or meta.get("model") or _job_name(path),
                         "seconds": float(meta["seconds"]), "max_rss_mb": float("nan"),
                         "cpu_seconds": float("nan"), "device": meta.get("device"), "source": "parquet metadata"})
    return pd.DataFrame(rows, columns=RUNTIME_COLUMNS).sort_values(["rule", "job"], ignore_index=True)


def runtime_html(frame: pd.DataFrame) -> str:
    """The table as a small self-contained HTML page (the report embeds it)."""
    total = frame.groupby("rule")["seconds"].agg(["count", "sum"]).rename(columns={"count": "jobs",
                                                                                    "sum": "seconds"})
    body = (frame.to_html(index=False, float_format=lambda x: f"{x:.1f}", na_rep="")
            + "<h3>Per rule</h3>" + total.to_html(float_format=lambda x: f"{x:.1f}"))
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Runtimes</title></head><body>{body}</body></html>"
