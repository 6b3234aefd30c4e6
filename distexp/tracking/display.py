"""What the MLflow UI shows of a job's run, as text: display tags and the run's description.

MLflow's runs table shows metrics as raw floats (0.9138888888) and cuts run names; these tags
carry the rounded figures a comparison needs, so that the columns distexp.tracking.view picks
read at once. They repeat the metrics (the metrics stay the numbers to compute with):

- ``examples/s``: perf/examples_per_sec rounded, with its 95 % interval ("20,586 [19,800, 21,300]";
  "(no CI)" when the run had under 20 timed steps: then the figure is one noisy window)
- ``accuracy``: the task's eval figure (task.eval_metric; eval/accuracy by default), 3 decimals,
  named when it is not accuracy ("0.52 token_accuracy")
- ``mlflow.note.content`` (the run's Description): "mirrored, 2 replicas, global batch 128"
"""
from __future__ import annotations

import math
from typing import Dict, Mapping, Optional

from distexp.figures import perf_keys, text
from distexp.options.groups import workload  # what a run calls a user's model or data
from distexp.tracking import tags as tag


def rate_text(rate: Optional[float], ci95: Optional[float]) -> Optional[str]:
    """examples/s with its interval, by its one formatter (distexp.figures.text.rate)."""
    if rate is None or not math.isfinite(rate):
        return None
    if ci95 is None or not math.isfinite(ci95):  # under 2 windows of 10 timed steps
        return f"{text.rate(rate)} (no CI)"
    return text.rate(rate, ci95)


def description(params: Mapping[str, str]) -> str:
    strategy = params.get("strategy.name", "?")
    replicas = params.get("num_replicas", "?")
    batch = params.get("global_batch_size", "?")
    model, data = (workload(g, params.get(f"{g}.name", "?"), params.get(f"{g}.factory"))
                   for g in ("model", "dataset"))
    loop = params.get("loop.name")
    return (f"{strategy}, {replicas} replica{'' if replicas == '1' else 's'}, global batch {batch} "
            f"({model} on {data}{', ' + loop + ' loop' if loop else ''})")


def job_tags(metrics: Mapping[str, float], params: Mapping[str, str]) -> Dict[str, str]:
    tags = {tag.NOTE: description(params)}
    rate = rate_text(metrics.get(perf_keys.EXAMPLES_PER_SEC), metrics.get(perf_keys.EXAMPLES_PER_SEC_CI95))
    if rate:
        tags[tag.EXAMPLES_PER_SEC] = rate
    name = params.get("task.eval_metric") or "eval/accuracy"
    value = metrics.get(name)
    if value is not None and math.isfinite(value):
        tags[tag.ACCURACY] = f"{value:.3f}" + ("" if name == "eval/accuracy" else f" {name[5:]}")
    return tags
