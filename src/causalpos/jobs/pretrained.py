"""Rule pretrained: a GGUF model of extraction.pretrained.models dequantised into a safetensors folder (loaded in a
second by the extraction)."""

from __future__ import annotations

from causalpos.models.pretrained import convert_gguf


def run(job) -> None:
    convert_gguf(job.params.spec, job.output[0], f"extraction.pretrained.models.{job.wildcards.model}")
