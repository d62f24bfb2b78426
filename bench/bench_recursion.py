"""Time the large-d recursion at LLM size, beside the Monte Carlo engine's cost per layer and sample.

    python bench/bench_recursion.py                       # S 1,024, 30 layers, RoPE, Gemma-like windows
    python bench/bench_recursion.py --seq-len 2048 --skip-engine
    python bench/bench_recursion.py --window 0            # every layer global

The recursion (causalpos.simulation.recursion.recursion) runs a Gemma-3-like stack: RoPE with head
dimension d, five sliding-window layers (window 512, base 10,000) to one global layer (base 1,000,000),
repeated to 30 layers, alpha 0, l2, causal. The engine (causalpos.simulation.engine.simulate, CPU kernel)
has no window, so its side is the same shape without one (every layer global, base 10,000): a few samples
of a two-layer decoder, to give the cost of one layer of one sample; a Monte Carlo of the stack needs that
times 30 layers times N samples (N ~ 10^4-10^5 for standard errors of ~1e-3). Each side runs in its own
subprocess, so each peak RSS (ru_maxrss) is its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import subprocess
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--n-layers", type=int, default=30)
    p.add_argument("--d", type=int, default=256, help="head dimension: RoPE's planes")
    p.add_argument("--window", type=int, default=512, help="sliding window of the local layers (0: none)")
    p.add_argument("--local-per-global", type=int, default=5)
    p.add_argument("--local-theta", type=float, default=1e4)
    p.add_argument("--global-theta", type=float, default=1e6)
    p.add_argument("--engine-samples", type=int, default=16)
    p.add_argument("--skip-engine", action="store_true")
    p.add_argument("--repeats", type=int, default=3, help="recursion runs; the fastest is reported")
    p.add_argument("--json", help="also write the numbers to this file")
    p.add_argument("--side", choices=("recursion", "engine"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pattern(args):
    period = args.local_per_global + 1
    is_global = [(layer + 1) % period == 0 or not args.window for layer in range(args.n_layers)]
    windows = [None if g else args.window for g in is_global]
    thetas = [args.global_theta if g else args.local_theta for g in is_global]
    return windows, thetas


def run_recursion(args) -> dict:
    from causalpos.simulation.recursion import recursion
    from causalpos.simulation.variant import Variant

    v = Variant(pe="rope", d=args.d, seq_len=args.seq_len, n_layers=args.n_layers)
    windows, thetas = pattern(args)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = recursion(v, window=windows, rope_theta=thetas)
        times.append(time.perf_counter() - start)
        del result
    return {"seconds": min(times), "all_seconds": times, "peak_rss_mib": peak_rss_mib(),
            "output_mib": 2 * args.n_layers * args.seq_len**2 * 8 / 2**20}


def run_engine(args) -> dict:
    from causalpos.simulation.engine import simulate
    from causalpos.simulation.variant import Variant

    v = Variant(pe="rope", d=args.d, seq_len=args.seq_len, n_layers=2, n_samples=args.engine_samples,
                rope_theta=args.local_theta)
    simulate(dataclasses.replace(v, n_samples=2, n_layers=1), device="cpu")  # compile or load the kernel
    start = time.perf_counter()
    simulate(v, device="cpu")
    seconds = time.perf_counter() - start
    per = seconds / (v.n_samples * v.n_layers)
    return {"seconds": seconds, "samples": v.n_samples, "layers": v.n_layers, "per_layer_sample_s": per,
            "stack_per_sample_s": per * args.n_layers, "peak_rss_mib": peak_rss_mib()}


def side(args, name: str) -> dict:
    argv = [f"--{key.replace('_', '-')}={value}" for key, value in vars(args).items()
            if key not in ("side", "json", "skip_engine")]
    out = subprocess.run([sys.executable, __file__, *argv, "--side", name], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    args = parse_args(argv)
    if args.side:
        print(json.dumps(run_recursion(args) if args.side == "recursion" else run_engine(args)))
        return
    windows, _ = pattern(args)
    print(f"S = {args.seq_len}, {args.n_layers} layers, d = {args.d}, RoPE; windows: "
          f"{sum(w is not None for w in windows)} layers of {args.window or '-'}, "
          f"{sum(w is None for w in windows)} global")
    numbers = {"recursion": side(args, "recursion")}
    r = numbers["recursion"]
    print(f"recursion: {r['seconds']:.2f} s (runs: {', '.join(f'{t:.2f}' for t in r['all_seconds'])}), "
          f"{r['seconds'] / args.n_layers * 1e3:.0f} ms a layer, peak RSS {r['peak_rss_mib']:.0f} MiB "
          f"(scores + probs kept: {r['output_mib']:.0f} MiB)")
    if not args.skip_engine:
        numbers["engine"] = e = side(args, "engine")
        print(f"engine, no window, {e['samples']} samples x {e['layers']} layers: {e['seconds']:.2f} s = "
              f"{e['per_layer_sample_s'] * 1e3:.1f} ms a layer and sample; the {args.n_layers}-layer stack: "
              f"{e['stack_per_sample_s']:.2f} s a sample, {e['stack_per_sample_s'] * 1e4 / 3600:.1f} h for "
              f"N = 10,000; peak RSS {e['peak_rss_mib']:.0f} MiB")
        print(f"one recursion = {r['seconds'] / e['stack_per_sample_s']:.1f} Monte Carlo samples of the stack")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(numbers, fh, indent=2)


if __name__ == "__main__":
    main()
