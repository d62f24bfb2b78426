"""Time the streaming engine against a naive reference and the FLOP floor at the paper's scale, in one run.

    python bench/bench_simulate.py                      # l2, alpha 0, n 50, d 64, 4 layers, N 100,000, official law
    python bench/bench_simulate.py --n-samples 20000 --norm layernorm --scale sqrt_d
    python bench/bench_simulate.py --skip-naive --pe rope --mask none
    python bench/bench_simulate.py --alpha 0.2 --sampler exact
    python bench/bench_simulate.py --baseline-src /tmp/old/src       # also the engine of another source tree
    python bench/bench_simulate.py --config-variants config.yaml      # the engine alone on every configured variant

The naive reference is what a notebook would write: draw all N samples at once
in torch float32, keep every layer's score and probability tensor, then take
mean and std at the end. Each side runs in a subprocess so its peak RSS
(ru_maxrss) is its own; the engine runs --repeat times (median reported, with its
CPU time: on a shared machine wall time alone says little). The FLOP floor is the
matrix-product work the engine's kernel executes, at the rate of a large float32
matmul timed in the same run. Prints times, ratios, threads, the load average,
peak memory, and a statistical check that engine and naive estimate the same means.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

SIDES = ("engine", "baseline", "naive")


def parse_args(argv=None):
    from causalpos.simulation.variant import Variant

    defaults = Variant()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-samples", type=int, default=defaults.n_samples)
    p.add_argument("--norm", default=defaults.norm)
    p.add_argument("--scale", default=defaults.scale)
    p.add_argument("--alpha", type=float, default=defaults.alpha)
    p.add_argument("--pe", default=defaults.pe)
    p.add_argument("--rope-theta", type=float, default=defaults.rope_theta)
    p.add_argument("--mask", default=defaults.mask)
    p.add_argument("--residual", action=argparse.BooleanOptionalAction, default=defaults.residual)
    p.add_argument("--d", type=int, default=defaults.d)
    p.add_argument("--seq-len", type=int, default=defaults.seq_len)
    p.add_argument("--n-layers", type=int, default=defaults.n_layers)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--sampler", default=defaults.sampler, help="input law: official, exact, exact_full, exact_reduced")
    p.add_argument("--skip-naive", action="store_true", help="time the engine only")
    p.add_argument("--repeat", type=int, default=3, help="engine runs in its process (median reported)")
    p.add_argument("--threads", type=int, help="engine threads (default: torch's thread count)")
    p.add_argument("--baseline-src", help="also time the engine of this source tree (its src/ folder), side by side")
    p.add_argument("--config-variants", help="time the engine alone on every simulation variant of this config")
    p.add_argument("--json", help="also write the numbers to this file")
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # internal: run one side
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--variant-json", help=argparse.SUPPRESS)  # internal: the variant's fields (--config-variants)
    return p.parse_args(argv)


def variant_from(args):
    from causalpos.simulation.variant import Variant

    if args.variant_json:
        return Variant(**json.loads(args.variant_json))
    # every Variant field that has an option (--n-layers: n_layers); the others (window) keep their defaults
    return Variant(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Variant) if hasattr(args, f.name)})


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


# ---------------------------------------------------------------- the two sides


def run_engine(v, repeat: int, threads: int | None):
    import torch

    from causalpos.simulation.engine import simulate

    threads = threads or torch.get_num_threads()
    start = time.perf_counter()
    simulate(dataclasses.replace(v, n_samples=2), threads=threads)  # compile the kernel or load it from the cache
    warmup = time.perf_counter() - start
    walls, cpus = [], []
    for _ in range(repeat):
        cpu = time.process_time()  # every thread of the process
        result = simulate(v, threads=threads)
        walls.append(result.seconds)
        cpus.append(time.process_time() - cpu)
    return {
        "seconds": float(np.median(walls)),
        "all_seconds": walls,
        "cpu_seconds": float(np.median(cpus)),
        "threads": threads,
        "warmup_seconds": warmup,
        "sampler": result.sampler,
        "score_mean": result.score_mean,
        "score_sem": result.score_sem,
        "prob_mean": result.prob_mean,
        "prob_sem": result.prob_sem,
    }


def naive_inputs(v, gen):
    """All N samples of the variant's law in R^d (written from the law, not from the engine's code)."""
    import torch

    n, d, N = v.seq_len, v.d, v.n_samples
    shared = torch.randn(N, 1, d, generator=gen)
    noise = torch.randn(N, n, d, generator=gen)
    if v.sampler == "official":  # the authors' normalize(g_i + sqrt(alpha / (1 - alpha)) u)
        x = noise + math.sqrt(v.alpha / (1 - v.alpha)) * shared
        return x / x.norm(dim=-1, keepdim=True)
    if v.alpha == 0:  # ours, i.i.d. case: uniform on the sphere
        return noise / noise.norm(dim=-1, keepdim=True)
    shared = shared / shared.norm(dim=-1, keepdim=True)  # ours: a shared unit direction, noise orthogonal
    noise = noise - (noise * shared).sum(-1, keepdim=True) * shared
    noise = noise / noise.norm(dim=-1, keepdim=True)
    return math.sqrt(v.alpha) * shared + math.sqrt(1 - v.alpha) * noise


def run_naive(v):
    """Everything at once, float32, every intermediate kept; written independently of the engine."""
    import torch

    n, d, N = v.seq_len, v.d, v.n_samples
    start = time.perf_counter()
    with torch.no_grad():
        x = naive_inputs(v, torch.Generator().manual_seed(v.seed + 12345))

        mask = torch.triu(torch.full((n, n), float("-inf")), 1) if v.mask == "causal" else torch.zeros(n, n)
        freq = v.rope_theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        angle = torch.arange(n, dtype=torch.float64)[:, None] * freq
        cos, sin = torch.cat([angle, angle], -1).cos().float(), torch.cat([angle, angle], -1).sin().float()
        divisor = {"none": 1.0, "sqrt_d": math.sqrt(d), "d": float(d)}[v.scale]

        scores, probs = [], []
        for layer in range(v.n_layers):
            if v.norm == "l2":
                y = x / x.norm(dim=-1, keepdim=True)
            else:
                y = torch.nn.functional.layer_norm(x, (d,))
            q = y * cos + torch.cat([-y[..., d // 2 :], y[..., : d // 2]], -1) * sin if v.pe == "rope" else y
            s = q @ q.transpose(1, 2) / divisor
            p = torch.softmax(s + mask, dim=-1)
            scores.append(s)
            probs.append(p)
            x = p @ y + x if v.residual else p @ y
        out = {}
        for name, tensors in (("score", scores), ("prob", probs)):  # each [N, n, n]
            out[f"{name}_mean"] = np.stack([t.mean(0).double().numpy() for t in tensors])
            out[f"{name}_sem"] = np.stack([(t.std(0) / math.sqrt(N)).double().numpy() for t in tensors])
    out["seconds"] = time.perf_counter() - start
    return out


def side_main(args):
    v = variant_from(args)
    result = run_engine(v, args.repeat, args.threads) if args.side in ("engine", "baseline") else run_naive(v)
    result["peak_rss_mib"] = peak_rss_mib()
    arrays = {k: val for k, val in result.items() if isinstance(val, np.ndarray)}
    np.savez(args.out, **arrays)
    with open(args.out + ".json", "w") as fh:
        json.dump({k: val for k, val in result.items() if k not in arrays}, fh)


def run_side(side: str, argv, tmp: str, src: str | None = None, name: str | None = None):
    """One side in a fresh process; src: run it on that source tree (PYTHONPATH first, its own numba cache)."""
    out = os.path.join(tmp, name or side)
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(src), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["NUMBA_CACHE_DIR"] = os.path.join(tmp, "numba_cache_baseline")
    subprocess.run([sys.executable, __file__, *argv, "--side", side, "--out", out], check=True, env=env)
    with open(out + ".json") as fh:
        info = json.load(fh)
    with np.load(out + ".npz") as arrays:
        info.update({k: arrays[k] for k in arrays.files})
    return info


# ---------------------------------------------------------------- flops and the machine's peak


def matmul_flops_per_sample(v, sampler: str) -> tuple[float, float]:
    """(dense, executed) matmul FLOPs per sample, 2 per multiply-add.

    dense: what the naive reference computes, S = QQ^T (n*n*d) in every layer
    and AY (n*n*d) in all but the last.
    executed: the least the CPU kernel needs: S's lower triangle only (Q = K), the
    visible keys of AY, and in the reduced basis (`sampling.kernel_basis_is_reduced`:
    exact_reduced, or the official law where it is exact) under the causal mask the
    lower-trapezoidal rows (row i has min(lead + i + 1, D) nonzero columns, lead = 1
    for the shared coordinate when alpha > 0); padding to 8 floats not counted.
    """
    from causalpos.simulation.sampling import kernel_basis_is_reduced

    n, d, L = v.seq_len, v.d, v.n_layers
    dense = 2.0 * n * n * d * (2 * L - 1)
    reduced = kernel_basis_is_reduced(v, sampler)
    lead = 1 if v.alpha > 0 else 0
    width = lead + min(n, d - lead) if reduced else d
    w = [min(lead + i + 1, width) if (reduced and v.mask == "causal") else width for i in range(n)]
    s_macs = sum(min(w[i], w[j]) for i in range(n) for j in range(i + 1))
    first_key = [max(i - v.window + 1, 0) if v.window else 0 for i in range(n)]
    mix_macs = sum(w[j] for i in range(n) for j in range(first_key[i], i + 1)) if v.mask == "causal" else n * n * width
    first_s = s_macs
    if v.mask == "none" and reduced:  # unmasked mixing fills every column after layer 1
        s_macs = n * (n + 1) // 2 * width
    executed = 2.0 * (first_s + s_macs * (L - 1) + mix_macs * (L - 1))
    return dense, executed


def matmul_peak_gflops(size: int = 2000, repeats: int = 5) -> float:
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2.0 * size**3 / best / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def agreement(engine, naive, v):
    """z-scores of the mean differences over visible, non-degenerate entries of every layer."""
    from causalpos.matrices import visible_pairs

    visible = visible_pairs(v.seq_len, v.mask)
    zs, flat = [], 0.0
    for name in ("score", "prob"):
        se = np.hypot(engine[f"{name}_sem"], naive[f"{name}_sem"])[:, visible]
        diff = (engine[f"{name}_mean"] - naive[f"{name}_mean"])[:, visible]
        keep = se > 1e-6  # entries fixed up to float32 rounding (the S diagonal) are compared directly
        zs.append(diff[keep] / se[keep])
        flat = max(flat, float(np.abs(diff[~keep]).max(initial=0.0)))
    z = np.concatenate(zs)
    return {
        "entries": int(z.size),
        "max_abs_z": float(np.abs(z).max()),
        "mean_z": float(z.mean()),
        "std_z": float(z.std()),
        "max_abs_diff_degenerate": flat,
    }


def basis(v, sampler: str) -> str:
    from causalpos.simulation.sampling import kernel_basis_is_reduced

    return "reduced" if kernel_basis_is_reduced(v, sampler) else "full"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def side_row(name: str, side: dict, engine: dict, floor: float) -> str:
    cpu = f"{side['cpu_seconds']:.2f}" if "cpu_seconds" in side else ""
    return (
        f"| {name} | {side['seconds']:.2f} s | {cpu} | {side['peak_rss_mib']:,.0f} MiB | "
        f"{side['seconds'] / engine['seconds']:.2f} | {side['seconds'] / floor:.2f} |"
    )


def config_variants_main(args, argv):
    """The engine alone (and the baseline's, if given) on every simulation variant of a config, one process each."""
    import yaml

    from causalpos.simulation.variant import Variant

    with open(args.config_variants) as fh:
        sim = yaml.safe_load(fh)["simulation"]
    peak = matmul_peak_gflops()
    print(f"load average before: {load()}; 2000x2000 fp32 matmul {peak:.1f} GFLOP/s")
    print(
        "| variant | sampler | basis | engine | engine CPU | floor | engine / floor |"
        + (" baseline | baseline / engine |" if args.baseline_src else "")
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in sim["variants"].items():
            params = {**(sim.get("defaults") or {}), **(overrides or {})}
            v = Variant(**params)
            side_argv = [*argv, "--variant-json", json.dumps(params)]
            engine = run_side("engine", side_argv, tmp, name=f"engine_{name}")
            baseline = (
                run_side("baseline", side_argv, tmp, args.baseline_src, f"base_{name}") if args.baseline_src else None
            )
            floor = matmul_flops_per_sample(v, v.resolved_sampler)[1] * v.n_samples / (peak * 1e9)
            row = (
                f"| {name} | {v.resolved_sampler} | {basis(v, v.resolved_sampler)} | {engine['seconds']:.2f} s | "
                f"{engine['cpu_seconds']:.2f} s | {floor:.2f} s | {engine['seconds'] / floor:.1f} |"
            )
            if baseline:
                row += f" {baseline['seconds']:.2f} s | {baseline['seconds'] / engine['seconds']:.2f} |"
            print(row, flush=True)
            rows.append(
                {
                    "variant": name,
                    "engine": engine["seconds"],
                    "cpu": engine["cpu_seconds"],
                    "floor": floor,
                    "baseline": baseline["seconds"] if baseline else None,
                }
            )
    print(f"load average after: {load()}; threads {engine['threads']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"peak_gflops": peak, "rows": rows}, fh, indent=2)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.side:
        return side_main(args)
    if args.config_variants:
        return config_variants_main(args, argv)
    import torch

    v = variant_from(args)
    sampler = v.resolved_sampler
    print(f"variant: {v}")
    print(
        f"machine: {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
        f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}; load average before: {load()}"
    )
    report = {"variant": dataclasses.asdict(v), "sampler": sampler, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        engine = run_side("engine", argv, tmp)
        baseline = run_side("baseline", argv, tmp, args.baseline_src) if args.baseline_src else None
        naive = None if args.skip_naive else run_side("naive", argv, tmp)
    peak = matmul_peak_gflops()
    dense, executed = matmul_flops_per_sample(v, sampler)
    N = v.n_samples
    floor = executed * N / (peak * 1e9)
    report["load_after"] = os.getloadavg()

    print(
        f"engine: {sampler} law, {basis(v, sampler)} basis, {engine['threads']} threads, median of "
        f"{len(engine['all_seconds'])} runs ({', '.join(f'{s:.2f}' for s in engine['all_seconds'])} s); first call "
        f"(compile or cache load) {engine['warmup_seconds']:.2f} s, not included"
    )
    print("| side | wall | CPU s | peak RSS | / engine | / FLOP floor |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(side_row("engine", engine, engine, floor))
    if baseline is not None:
        print(side_row(f"engine of {args.baseline_src}", baseline, engine, floor))
    if naive is not None:
        print(side_row("naive reference", naive, engine, floor))
    print(
        f"| FLOP floor (executed matmul FLOPs at the matmul rate) | {floor:.2f} s | | | {floor / engine['seconds']:.2f} "
        f"| 1 |"
    )
    print(f"load average after: {load()}")
    report["engine"] = {
        k: engine[k]
        for k in ("seconds", "all_seconds", "cpu_seconds", "threads", "warmup_seconds", "peak_rss_mib", "sampler")
    }
    if baseline is not None:
        report["baseline"] = {k: baseline[k] for k in ("seconds", "all_seconds", "cpu_seconds", "peak_rss_mib")}
    if naive is not None:
        report["naive"] = {k: naive[k] for k in ("seconds", "peak_rss_mib")}
        report["agreement"] = agreement(engine, naive, v)
        a = report["agreement"]
        print(
            f"means agree: {a['entries']} visible entries, max |z| {a['max_abs_z']:.2f}, "
            f"z mean {a['mean_z']:+.3f}, z std {a['std_z']:.3f} (expect ~0 and ~1); "
            f"degenerate entries max |diff| {a['max_abs_diff_degenerate']:.1e}"
        )
    print(f"FLOPs (matmul only, 2 per multiply-add, per sample x N = {N:,}):")
    print(
        f"  dense decoder (n^2 d per S and per AY, what the naive computes): "
        f"{dense * N / 1e9:.1f} GFLOP -> engine {dense * N / engine['seconds'] / 1e9:.1f} GFLOP/s equivalent"
        + (f", naive {dense * N / naive['seconds'] / 1e9:.1f} GFLOP/s" if naive is not None else "")
    )
    print(
        f"  executed by the engine (symmetric half of S, triangular/reduced shapes): "
        f"{executed * N / 1e9:.1f} GFLOP -> {executed * N / engine['seconds'] / 1e9:.1f} GFLOP/s"
    )
    print(f"  machine: 2000x2000 fp32 matmul {peak:.1f} GFLOP/s ({torch.get_num_threads()} threads)")
    report["flops"] = {
        "dense_per_sample": dense,
        "executed_per_sample": executed,
        "matmul_peak_gflops": peak,
        "floor_seconds": floor,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)


if __name__ == "__main__":
    main()
