"""extraction.per_head on a GPU: the head maps against eager attention on CUDA, and what they cost there.

    PYTHONPATH=src python3 bench/device_heads.py     # on the GPU machine (no config is read: no jsonschema needed)

1. correctness on CUDA: tiny random Llama (6 query heads on 2 key heads) and Gemma-3 (4 on 2, a sliding window)
   on the GPU; each recorded head map against eager attention's mean pre-softmax logits there, and the heads'
   mean against the head average (tests/integration/test_heads.py's checks, on the device);
2. the default run's extraction (64 x 256 tokens, batch 4, intermediates of layer 0, the probe, 16 groups) of a
   SmolLM2-135M-shaped model (bench/shapes, random weights) with per_head off, on, on, off: wall time, and the
   per-batch step alternated between two runs (median ratio on / off);
3. the recorder alone at the paper's size, S = 1,024, batch 8, on random queries and keys of Llama-3.1-8B's shape
   (32 layers, 32 heads on 8, head dim 128): seconds per batch of the head average and of the head maps.

Prints one JSON object; writes it to $OUT/device_heads.json when OUT is set.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from causalpos.models import extract as extraction  # noqa: E402
from causalpos.models.extract import ATTENTION_NAME, extract, extract_to_files  # noqa: E402
from causalpos.models.recorder import ScoreRecorder  # noqa: E402
from causalpos.catalogue.tables import ACTIVATION_TABLES  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DEFAULT_RUN = dict(batch_size=4, intermediates_layer=0, probe_sequences=200, probe_positions=32, n_groups=16)


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def tiny(kind: str):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(5)
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                                             initializer_range=0.2))
    else:
        model = Gemma3ForCausalLM(Gemma3TextConfig(
            vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, sliding_window=5,
            layer_types=["sliding_attention", "full_attention"], max_position_embeddings=64, initializer_range=0.2,
            rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}))
    return model


def correctness(kind: str) -> dict:
    from transformers import AutoModelForCausalLM

    folder = tempfile.mkdtemp(prefix=f"heads_{kind}_")
    tiny(kind).save_pretrained(folder)
    load = lambda attention: AutoModelForCausalLM.from_pretrained(  # noqa: E731
        folder, attn_implementation=attention, dtype=torch.float32).to(DEVICE).eval()
    ids = np.random.default_rng(0).integers(0, 97, size=(7, 14))
    caught, softmax = [], torch.nn.functional.softmax

    def spy(x, *args, **kwargs):
        caught.append(x.detach().double().cpu().clone())
        return softmax(x, *args, **kwargs)

    torch.nn.functional.softmax = spy
    try:
        with torch.no_grad():
            load("eager").model(input_ids=torch.from_numpy(ids).to(DEVICE), use_cache=False)
    finally:
        torch.nn.functional.softmax = softmax
    result = extract(load(ATTENTION_NAME), ids, "tiny", "pretrained", batch_size=3, intermediates_layer=None,
                     probe_sequences=0, n_groups=2, per_head=True)
    table, scores = result.head_scores, result.scores
    lower = np.tril(np.ones((14, 14), dtype=bool))
    head_error = average_error = 0.0
    for layer, logits in enumerate(caught):
        seen = lower & (logits > -1e30).all(dim=(0, 1)).numpy()
        rows = table[table["layer"] == layer]
        maps = np.full((logits.shape[1], 14, 14), np.nan)
        maps[rows["head"], rows["query_pos"], rows["key_pos"]] = rows["score_mean"]
        head_error = max(head_error, float(np.abs(maps[:, seen] - logits.mean(dim=0).numpy()[:, seen]).max()))
        rows = scores[scores["layer"] == layer]
        average = np.full((14, 14), np.nan)
        average[rows["query_pos"], rows["key_pos"]] = rows["score_mean"]
        average_error = max(average_error, float(np.abs(maps.mean(axis=0)[seen] - average[seen]).max()))
    return {"kind": kind, "max_head_error": head_error, "max_average_error": average_error,
            "ok": head_error < 1e-4 and average_error < 1e-4}


def smollm2():
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = json.loads((ROOT / "bench" / "shapes" / "smollm2_135m.json").read_text())
    config = AutoConfig.for_model(spec.pop("model_type"), **{k: v for k, v in spec.items() if not k.startswith("_")})
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation=ATTENTION_NAME,
                                            dtype=torch.float32).to(DEVICE).eval()


def default_run(model) -> dict:
    tokens = np.random.default_rng(0).integers(0, model.config.vocab_size, size=(64, 256))
    runs = {flag: extraction.ExtractionRun(model, tokens, "bench", "pretrained",
                                           extraction.ExtractionSettings(**DEFAULT_RUN, per_head=flag))
            for flag in (False, True)}
    times = {False: [], True: []}
    with torch.no_grad():
        for index in range(runs[False].n_batches):
            for flag in ((False, True) if index % 2 == 0 else (True, False)):
                sync()
                start = time.perf_counter()
                runs[flag].run_batch()
                sync()
                times[flag].append(time.perf_counter() - start)
    whole, size = {False: [], True: []}, {}
    for flag in (False, True, True, False):
        with tempfile.TemporaryDirectory(prefix="bench_heads_") as folder:
            paths = {table: Path(folder) / f"{table}.parquet" for table in ACTIVATION_TABLES}
            start = time.perf_counter()
            loop = extract_to_files(model, tokens, "bench", "pretrained", paths, progress=False, per_head=flag,
                                    **DEFAULT_RUN)
            whole[flag].append((time.perf_counter() - start, loop))
            size[flag] = paths["head_scores"].stat().st_size
    return {"batch_median_s": {str(k): statistics.median(v) for k, v in times.items()},
            "batch_ratio_on_off": statistics.median(on / off for on, off in zip(times[True], times[False])),
            "whole_s_and_loop_s": {str(k): v for k, v in whole.items()},
            "whole_ratio_on_off": statistics.median(w for w, _ in whole[True]) /
            statistics.median(w for w, _ in whole[False]),
            "head_scores_bytes": size[True]}


def paper_size_recorder(layers=32, heads=32, kv=8, dim=128, seq=1024, batch=8, reps=3) -> dict:
    generator = torch.Generator(device=DEVICE).manual_seed(0)
    query = torch.randn(batch, heads, seq, dim, device=DEVICE, generator=generator, dtype=torch.bfloat16)
    key = torch.randn(batch, kv, seq, dim, device=DEVICE, generator=generator, dtype=torch.bfloat16)
    out = {}
    for flag in (False, True, False, True):
        recorder = ScoreRecorder(layers, seq, DEVICE, per_head=flag)
        for layer in range(layers):  # warm-up pass
            recorder.record_scores(layer, query, key, dim ** -0.5)
        sync()
        start = time.perf_counter()
        for _ in range(reps):
            for layer in range(layers):
                recorder.record_scores(layer, query, key, dim ** -0.5)
        sync()
        out.setdefault(str(flag), []).append((time.perf_counter() - start) / reps)
        del recorder
    torch.cuda.empty_cache() if DEVICE.type == "cuda" else None
    return {"shape": f"{layers} layers, {heads}/{kv} heads, head dim {dim}, S {seq}, batch {batch}, bf16 inputs",
            "seconds_per_batch": out, "head_sums_gib": layers * heads * seq * (seq + 1) / 2 * 8 / 2 ** 30}


def main() -> dict:
    result = {"device": torch.cuda.get_device_name(0) if DEVICE.type == "cuda" else "cpu",
              "torch": torch.__version__}
    started = time.perf_counter()
    result["correctness"] = [correctness(kind) for kind in ("llama", "gemma3")]
    print(json.dumps(result["correctness"]), flush=True)
    result["paper_size_recorder"] = paper_size_recorder()
    print(json.dumps(result["paper_size_recorder"]), flush=True)
    result["default_run_smollm2"] = default_run(smollm2())
    result["seconds"] = time.perf_counter() - started
    text = json.dumps(result, indent=1)
    print(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "device_heads.json").write_text(text + "\n")
    return result


if __name__ == "__main__":
    main()
