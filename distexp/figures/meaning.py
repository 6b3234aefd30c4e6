"""What a figure means (no TensorFlow): where an accuracy says nothing, where a peak came from.

- `accuracy_meaningful(dataset_name)`: False for datasets whose labels are drawn at random
  (`synthetic`; not `synthetic_pairs`, whose targets are the sources' digits): their accuracy
  is chance level by construction, so the report shows "n/m (random labels)" and the trainer can say so on the console.
- `peak_source(tag)`: how perf/peak_flops (the MFU denominator) was obtained, for the report.
"""
from __future__ import annotations

from typing import Optional

RANDOM_LABELS = ("synthetic",)
NOT_MEANINGFUL = "n/m (random labels)"
MEASURED_PEAK = ("measured: a float32 512x512 matmul benchmark during the run (runs before "
                 "distexp v3; it moved with the machine's load, so their MFU is not shown)")


def accuracy_meaningful(dataset_name: str) -> bool:
    """Whether accuracy on this dataset measures learning (False: random labels)."""
    return dataset_name not in RANDOM_LABELS


def peak_source(tag: Optional[str]) -> str:
    """The run's tag `distexp.peak_source` (a GPU datasheet, distexp.figures.peaks; the CPU's
    theoretical peak, distexp.figures.cpu_peak), else what older runs divided by: a matmul
    benchmark measured during the run."""
    return tag or MEASURED_PEAK
