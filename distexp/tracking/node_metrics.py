"""System metrics of a node that does not hold the chief: MLflow's own monitor with its `node_id`
(metrics `system/<host>/...`) on the chief's run, from the first task on that node.

The job's run belongs to the chief's job process (distexp.job.lifecycle); this is the one thing
another task adds to it: what only that node can measure (CPU, memory, network of the node). The
task finds the run by the tag the chief set (`distexp.cluster_id`, e.g. `slurm:<job>.<step>`),
polling until it appears, and never fails or slows the job: any error only ends the sampling."""
from __future__ import annotations

import logging
import threading
from typing import List, Optional

from distexp.tracking import tags as tag


class NodeMetrics:
    POLL_S = 1.0
    FIND_S = 300.0

    def __init__(self, uri: str, experiment: str, cluster_id: str, node_id: str, interval: float,
                 gpus: Optional[List[str]] = None):
        self.uri, self.experiment, self.cluster_id = uri, experiment, cluster_id
        self.node_id, self.interval = node_id, interval
        self.gpus = gpus  # the GPUs the job's processes use on this node (gpu_metrics.restrict)
        self._stop = threading.Event()
        self._monitor = None
        self._thread = threading.Thread(target=self._main, name="distexp-node-metrics",
                                        daemon=True)

    def start(self) -> "NodeMetrics":
        self._thread.start()
        return self

    def _find(self) -> Optional[str]:
        from distexp.tracking.store import client

        c = client(self.uri)
        waited = 0.0
        while not self._stop.is_set() and waited < self.FIND_S:
            exp = c.get_experiment_by_name(self.experiment)
            if exp is not None:
                runs = c.search_runs([exp.experiment_id], max_results=1, filter_string=(
                    f"tags.`{tag.CLUSTER_ID}` = '{self.cluster_id}'"))
                if runs:
                    return runs[0].info.run_id
            self._stop.wait(self.POLL_S)
            waited += self.POLL_S
        return None

    def _main(self) -> None:
        logging.getLogger("mlflow.system_metrics").setLevel(logging.CRITICAL)
        try:
            run_id = self._find()
            if run_id is None or self._stop.is_set():
                return
            from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

            self._monitor = SystemMetricsMonitor(run_id, sampling_interval=self.interval,
                                                 tracking_uri=self.uri, node_id=self.node_id)
            from distexp.tracking.gpu_metrics import restrict

            restrict(self._monitor, self.gpus)
            self._monitor.start()
        except Exception:  # noqa: BLE001  (best effort: the job must not notice)
            return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self._monitor is not None:
            from distexp.tracking.forward import _finish_monitor

            try:
                _finish_monitor(self._monitor)
            except Exception:  # noqa: BLE001
                pass
