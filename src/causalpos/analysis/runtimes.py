"""How long each expensive job took, its peak memory and CPU time: one table for the report and for pandas.

Two sources, because Snakemake allows no `benchmark:` on a rule cached between
workflows (`cache: True`): the benchmark files of the uncached rules (train,
emergence, recursion: wall time, peak resident memory and CPU time as Snakemake measured
them; the device from the metadata of a Parquet file the job wrote) and what
each cached stage stores in its Parquet metadata (simulate, extract: the time
of the computation itself, the job's peak memory and CPU time, also when the
file later comes from the cache).
"""

from __future__ import annotations

import os

import pandas as pd

from causalpos.catalogue.tables import RUNTIME_COLUMNS
from causalpos.io import read_metadata

MISSING = "missing (no benchmark file)"  # the source of a job whose benchmark file is gone
HEADERS = {
    "rule": "Rule",
    "job": "Job",
    "seconds": "Wall time (s)",
    "max_rss_mb": "Peak memory (MB)",
    "cpu_seconds": "CPU time (s)",
    "device": "Device",
    "source": "Measured by",
    "jobs": "Jobs",
}


def job_name(path) -> str:
    return os.path.splitext(os.path.basename(str(path)))[0]


def runtime_frame(benchmarks: dict, parquets: dict) -> pd.DataFrame:
    """`benchmarks`: rule -> (benchmark .tsv, a Parquet file of the same job whose metadata names its device)
    pairs (a benchmark file that is gone gives a row of NaN times, its source MISSING); `parquets`: rule -> Parquet files with `seconds` (and `max_rss_mb`, `cpu_seconds`, `device`)
    metadata. Files written before a stage recorded its memory and CPU time leave those cells empty."""
    rows = []
    for rule, pairs in benchmarks.items():
        for path, companion in pairs:
            device = read_metadata(companion).get("device") if companion else None
            if not os.path.exists(path):  # a timing deleted after its job ran: reported missing, not remade
                rows.append({"rule": rule, "job": job_name(path), "device": device, "source": MISSING})
                continue
            bench = pd.read_csv(path, sep="\t")
            for _, run in bench.iterrows():  # one row per repeat of the benchmark
                rows.append(
                    {
                        "rule": rule,
                        "job": job_name(path),
                        "seconds": float(run["s"]),
                        "max_rss_mb": float(run["max_rss"]),
                        "cpu_seconds": float(run["cpu_time"]),
                        "device": device,
                        "source": "benchmark",
                    }
                )
    for rule, paths in parquets.items():
        for path in paths:
            meta = read_metadata(path)
            if "seconds" not in meta:
                raise ValueError(f"{path} has no run time in its metadata (not written by the {rule} stage?)")
            rows.append(
                {
                    "rule": rule,
                    "job": meta.get("variant") or meta.get("model") or job_name(path),
                    "seconds": float(meta["seconds"]),
                    "max_rss_mb": float(meta.get("max_rss_mb", "nan")),
                    "cpu_seconds": float(meta.get("cpu_seconds", "nan")),
                    "device": meta.get("device"),
                    "source": "stage metadata",
                }
            )
    return pd.DataFrame(rows, columns=RUNTIME_COLUMNS).sort_values(["rule", "job"], ignore_index=True)


def runtime_html(frame: pd.DataFrame, labels: dict | None = None) -> str:
    """The table as a small self-contained HTML page (the report embeds it): every job, then the sums per rule. A
    job named by a model's key shows the model's name (`labels`: NoPE, SmolLM2-135M; the table keeps the keys)."""
    frame = frame.assign(job=frame["job"].map(lambda job: (labels or {}).get(job, job)))
    totals = (
        frame.groupby("rule", sort=True)
        .agg(
            jobs=("job", "count"),
            seconds=("seconds", "sum"),
            cpu_seconds=("cpu_seconds", "sum"),
            max_rss_mb=("max_rss_mb", "max"),
        )
        .reset_index()
    )

    def table(data: pd.DataFrame) -> str:
        return data.rename(columns=HEADERS).to_html(
            index=False, float_format=lambda x: f"{x:,.1f}", na_rep="–", border=0, classes="runtimes"
        )

    style = (
        "body{font-family:sans-serif;font-size:14px;margin:1em}table{border-collapse:collapse;margin-bottom:1.5em}"
        "th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:right}"
        "th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}"
    )
    body = (
        f"<h2>Run time of every expensive job</h2>{table(frame)}"
        f"<h2>Per rule</h2><p>Sums of wall and CPU time, the largest peak memory.</p>"
        f"{table(totals[['rule', 'jobs', 'seconds', 'cpu_seconds', 'max_rss_mb']])}"
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Runtimes</title>"
        f"<style>{style}</style></head><body>{body}</body></html>"
    )
