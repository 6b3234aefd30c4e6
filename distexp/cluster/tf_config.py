"""cluster=tf_config: this job process is one task of a cluster an engine started (Kubeflow's
TFJob, Vertex AI), described by TF_CONFIG: one training process, which reads TF_CONFIG as
TensorFlow's TFConfigClusterResolver does. Only the chief's job process opens an MLflow run."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig

from distexp.cluster.kinds import ClusterConfig, External, peer_start_timeout, register
from distexp.cluster.processes import Plan
from distexp.errors import UserError
from distexp.strategies.record import task_name


@dataclass
class TFConfigConfig(ClusterConfig):
    peer_start_timeout: float = peer_start_timeout()


@register
class TFConfig(External):
    name = "tf_config"
    schema = TFConfigConfig

    def plan(self, cfg: DictConfig, rec, job_dir: Path, gpus: int) -> Plan:
        raw = os.environ.get("TF_CONFIG")
        task = _tf_config_task(cfg, raw)
        return self.task_plan(rec, job_dir, gpus, task,
                              {task_name(job, i): a
                               for job, addrs in json.loads(raw)["cluster"].items()
                               for i, a in enumerate(addrs)}, cfg.cluster.peer_start_timeout)


def _tf_config_task(cfg: DictConfig, raw: Optional[str]):
    """(task type, index, {job: count}) from TF_CONFIG, checked without TensorFlow."""
    if not raw:
        raise UserError("cluster: received 'tf_config' but TF_CONFIG is not set; the engine (TFJob, "
                        "Vertex AI) sets it, or set it yourself: {\"cluster\": {...}, \"task\": "
                        "{\"type\": \"worker\", \"index\": 0}}")
    try:
        spec = json.loads(raw)
        cluster, task = spec["cluster"], spec["task"]
        kind, index = str(task["type"]), int(task.get("index", 0))
        counts = {str(j): len(a) for j, a in cluster.items()}
        if not all(isinstance(a, list) and all(_address(x) for x in a) for a in cluster.values()):
            raise ValueError("every job must list host:port strings")
    except (ValueError, KeyError, TypeError, AttributeError) as ex:
        detail = ex.args[0] if isinstance(ex, KeyError) else ex
        raise UserError(f"TF_CONFIG: received {raw[:120]!r}; expected JSON {{\"cluster\": {{job: "
                        f"[host:port, ...]}}, \"task\": {{\"type\": job, \"index\": i}}}} "
                        f"({type(ex).__name__}: {detail})") from None
    if kind not in counts or not 0 <= index < counts[kind]:
        raise UserError(f"TF_CONFIG: received task {kind}:{index}; the cluster has "
                        f"{', '.join(f'{j} x{c}' for j, c in counts.items())}")
    return kind, index, counts


def _address(x) -> bool:
    host, _, port = x.rpartition(":") if isinstance(x, str) else ("", "", "")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536
