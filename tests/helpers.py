"""Reference computations shared by the extraction tests (imported as `from helpers import ...`) and by
bench/bench_extract.py (which puts tests/ on sys.path): independent of the extraction they check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from causalpos.models.recorder import ScoreRecorder


@dataclass
class ProbabilityRecorder(ScoreRecorder):
    """A ScoreRecorder that also sums the head-averaged attention probabilities, softmax of the recorded
    logits under the layer's mask, [layers, S, S] in `prob_total`: to compare with eager attention's."""

    prob_total: torch.Tensor = field(init=False)

    def __post_init__(self):
        super().__post_init__()
        self.prob_total = torch.zeros(self.n_layers, self.seq_len, self.seq_len, dtype=torch.float64,
                                      device=self.device)

    def record_scores(self, layer: int, query: torch.Tensor, key: torch.Tensor, scaling: float,
                      attention_mask: torch.Tensor | None = None) -> None:
        super().record_scores(layer, query, key, scaling, attention_mask)
        # per-head probabilities: a [batch, heads, S, S] transient
        heads, groups, seq = query.shape[1], key.shape[1], query.shape[2]
        k = key.float().repeat_interleave(heads // groups, dim=1)
        scores = torch.einsum("bhqd,bhkd->bhqk", query.float(), k) * scaling
        masked = torch.ones(seq, seq, dtype=torch.bool, device=scores.device).triu(1)
        if self.hidden[layer] is not None:
            query_pos, key_pos = torch.tril_indices(seq, seq, device=scores.device)
            masked[query_pos[self.hidden[layer]], key_pos[self.hidden[layer]]] = True
        probs = scores.masked_fill(masked, float("-inf")).softmax(dim=-1)
        self.prob_total[layer] += probs.double().mean(dim=1).sum(dim=0)


def mean_probabilities_eager(model, tokens: np.ndarray, batch_size: int = 8) -> np.ndarray:
    """The straightforward way: eager attention with output_attentions=True, averaged over sequences
    and heads, [layers, S, S]."""
    total = None
    for start in range(0, len(tokens), batch_size):
        batch = torch.from_numpy(np.asarray(tokens[start:start + batch_size], dtype=np.int64))
        # the decoder without its LM head: no logits, only what the comparison needs
        out = model.model(input_ids=batch.to(next(model.parameters()).device), output_attentions=True,
                          use_cache=False)
        stacked = torch.stack([a.double().mean(dim=1).sum(dim=0) for a in out.attentions])
        total = stacked if total is None else total + stacked
    return (total / len(tokens)).cpu().numpy()
