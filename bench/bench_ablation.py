"""What the pattern ablation's intervention costs: a forward pass with a bias subtracted from the logits (SDPA with
a float mask, models.intervention) against the plain model (SDPA's causal path), batch by batch, side by side.

The model is built from its config (bench/shapes/<shape>.json: SmolLM2-135M by default; `trained`: the default
run's NoPE/RoPE decoder, 4 layers of 256) with random weights: the time does not depend on them. Each batch of
random token ids is run with and without the bias (which goes first alternates, so a drift of the machine's load
falls on both); the median ratio biased / plain over batches is printed, with each side's median seconds. One
ablation job runs the plain pass once and the biased one four times per length, plus one estimation pass.

    python bench/bench_ablation.py                          # SmolLM2-135M-shaped, 16 batches of 4 x 256
    python bench/bench_ablation.py --shape trained --seq-len 1024 --threads 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINED = {"model_type": "smollm3", "vocab_size": 8192, "hidden_size": 256, "intermediate_size": 688,
           "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
           "max_position_embeddings": 1024, "no_rope_layers": [1, 1, 1, 1], "tie_word_embeddings": True,
           "pad_token_id": None, "bos_token_id": None, "eos_token_id": 0}


def build(shape: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from causalpos.models.intervention import ABLATION_ATTENTION

    spec = dict(TRAINED) if shape == "trained" else json.loads((ROOT / "bench" / "shapes" / f"{shape}.json").read_text())
    config = AutoConfig.for_model(spec.pop("model_type"), **{k: v for k, v in spec.items() if not k.startswith("_")})
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation=ABLATION_ATTENTION, dtype=torch.float32).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="smollm2_135m")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--json")
    args = parser.parse_args()

    import numpy as np
    import torch

    from causalpos.models.intervention import sequence_losses

    if args.threads:
        torch.set_num_threads(args.threads)
    model = build(args.shape)
    cpu = torch.device("cpu")
    bias = torch.randn(model.config.num_hidden_layers, args.seq_len, args.seq_len) * 0.3
    rng = np.random.default_rng(0)
    seconds = {"plain": [], "biased": []}
    for index in range(args.batches + 1):  # the first batch warms up, unmeasured
        tokens = rng.integers(0, model.config.vocab_size, size=(args.batch, args.seq_len))
        order = [("plain", None), ("biased", bias)]
        for name, extra in (order if index % 2 else order[::-1]):
            start = time.perf_counter()
            sequence_losses(model, tokens, extra, args.batch, cpu)
            if index:
                seconds[name].append(time.perf_counter() - start)
    ratios = [b / p for b, p in zip(seconds["biased"], seconds["plain"])]
    result = {"shape": args.shape, "seq_len": args.seq_len, "batch": args.batch, "batches": args.batches,
              "threads": torch.get_num_threads(), "plain_s": statistics.median(seconds["plain"]),
              "biased_s": statistics.median(seconds["biased"]), "ratio_biased_over_plain": statistics.median(ratios)}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
