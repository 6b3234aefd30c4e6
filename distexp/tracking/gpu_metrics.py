"""MLflow's system metrics for the GPUs a run's processes use, and no other.

MLflow's own NVIDIA monitor samples every GPU of the machine (NVML sees them all, whatever
CUDA_VISIBLE_DEVICES says) and names them gpu_0, gpu_1, ... in NVML's order. On a box shared by a
sweep's parallel jobs, or a job that uses one GPU of eight, that puts other jobs' GPUs in the run.
`restrict` swaps it for `RunGPUs`: the same figures (MLflow's names: gpu_<i>_utilization_percentage,
gpu_<i>_memory_usage_percentage and _megabytes, gpu_<i>_power_usage_watts and _percentage), for the
run's GPUs only, <i> being the GPU's index as nvidia-smi numbers it. The job's processes are told
CUDA_DEVICE_ORDER=PCI_BUS_ID (distexp.job.lifecycle), so a CUDA index there is that same index.
NVML comes from `nvidia-ml-py` (the `gpu` extra: pip install -e ".[gpu]").
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from mlflow.system_metrics.metrics.base_metrics_monitor import BaseMetricsMonitor


def nvml_indices(nvml, ids: Sequence[str]) -> List[int]:
    """NVML indices of CUDA_VISIBLE_DEVICES-style ids: an index, or a GPU's UUID (or the start
    of one, as CUDA accepts); ids NVML does not know (a MIG instance) are left out."""
    count = nvml.nvmlDeviceGetCount()
    uuids = None
    out = []
    for gid in ids:
        if gid.isdigit():
            if int(gid) < count:
                out.append(int(gid))
            continue
        if uuids is None:
            uuids = [nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
            uuids = [u.decode() if isinstance(u, bytes) else str(u) for u in uuids]
        out += [i for i, u in enumerate(uuids) if u.startswith(gid)][:1]
    return list(dict.fromkeys(out))


class RunGPUs(BaseMetricsMonitor):
    """MLflow's GPU figures for the GPUs of `indices` (NVML indices), named by index."""

    def __init__(self, nvml, indices: Sequence[int]):
        super().__init__()
        self.nvml = nvml
        self.gpus = [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]

    def _sample(self, handle) -> dict:
        nvml, out = self.nvml, {}
        try:
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            out["memory_usage_percentage"] = round(memory.used / memory.total * 100, 1)
            out["memory_usage_megabytes"] = memory.used / 1e6
        except nvml.NVMLError:
            pass
        try:
            out["utilization_percentage"] = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
        except nvml.NVMLError:
            pass
        try:
            power = nvml.nvmlDeviceGetPowerUsage(handle)
            out["power_usage_watts"] = power / 1000
            out["power_usage_percentage"] = power / nvml.nvmlDeviceGetEnforcedPowerLimit(handle) * 100
        except nvml.NVMLError:
            pass
        return out

    def collect_metrics(self):
        for index, handle in self.gpus:
            for name, value in self._sample(handle).items():
                self._metrics[f"gpu_{index}_{name}"].append(value)

    def aggregate_metrics(self):
        return {k: round(sum(v) / len(v), 1) for k, v in self._metrics.items()}


def restrict(monitor, gpu_ids: Optional[Sequence[str]]) -> None:
    """In `monitor` (MLflow's SystemMetricsMonitor, not started), replace the NVIDIA monitor with
    `RunGPUs` of `gpu_ids` (CUDA_VISIBLE_DEVICES-style ids of this machine); none at all when the
    run uses no GPU. `gpu_ids` None: unknown, MLflow's monitor stays."""
    from mlflow.system_metrics.metrics import gpu_monitor

    if gpu_ids is None:
        return
    kept = []
    for m in monitor.monitors:
        if isinstance(m, gpu_monitor.GPUMonitor):
            nvml = gpu_monitor.pynvml
            indices = nvml_indices(nvml, list(gpu_ids)) if gpu_ids else []
            if not indices:
                continue
            m = RunGPUs(nvml, indices)
        kept.append(m)
    monitor.monitors = kept
