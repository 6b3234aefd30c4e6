"""MLflow's system metrics name only the GPUs the run's processes use (NVML mocked: a 4-GPU box):
MLflow's own monitor would sample all four; distexp.tracking.gpu_metrics keeps the run's, under
their nvidia-smi index, and none for a CPU run. Which GPUs are the run's: the job's plan."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

UUIDS = [f"GPU-{i}aaaaaaa-0000-0000-0000-00000000000{i}" for i in range(4)]


def fake_nvml():
    """pynvml as NVML answers on a 4-GPU box: GPU i is i0 % busy, uses i GB of 80."""
    nvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    nvml.NVMLError = NVMLError
    nvml.nvmlInit = lambda: None
    nvml.nvmlDeviceGetCount = lambda: 4
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i
    nvml.nvmlDeviceGetUUID = lambda h: UUIDS[h]
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=h * 1e9, total=80e9)
    nvml.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=10 * h)
    nvml.nvmlDeviceGetPowerUsage = lambda h: 100_000 * (h + 1)
    nvml.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000
    return nvml


@pytest.fixture
def monitor(monkeypatch, tmp_path):
    """MLflow's SystemMetricsMonitor as the job builds it, on a box whose NVML is faked."""
    from mlflow.system_metrics.metrics import gpu_monitor
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    nvml = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(gpu_monitor, "pynvml", nvml, raising=False)

    def build():
        return SystemMetricsMonitor("0" * 32, sampling_interval=1,
                                    tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    return build


def gpu_keys(metrics):
    return sorted(k for k in metrics if k.startswith("gpu_"))


def test_mlflow_alone_samples_every_gpu_of_the_box(monitor):
    assert {k.split("_")[1] for k in gpu_keys(monitor().collect_metrics())} == {"0", "1", "2", "3"}


def test_only_the_runs_gpus_are_named(monitor):
    from distexp.tracking.gpu_metrics import restrict

    m = monitor()
    restrict(m, ["2"])
    metrics = m.collect_metrics()
    assert gpu_keys(metrics) == [f"gpu_2_{k}" for k in (
        "memory_usage_megabytes", "memory_usage_percentage", "power_usage_percentage",
        "power_usage_watts", "utilization_percentage")]
    assert metrics["gpu_2_utilization_percentage"] == [20]  # GPU 2's own figure
    assert metrics["gpu_2_power_usage_watts"] == [300.0]
    assert "cpu_utilization_percentage" in metrics  # the rest of MLflow's monitors stay
    # two GPUs, one named by its UUID's start (as CUDA_VISIBLE_DEVICES allows)
    m = monitor()
    restrict(m, ["1", UUIDS[3][:12]])
    assert {k.split("_")[1] for k in gpu_keys(m.collect_metrics())} == {"1", "3"}
    agg = m.aggregate_metrics()
    assert agg["gpu_3_memory_usage_percentage"] == 3.8 and "gpu_0_utilization_percentage" not in agg


def test_a_cpu_run_has_no_gpu_metrics_and_unknown_keeps_mlflows(monitor):
    from distexp.tracking.gpu_metrics import restrict

    m = monitor()
    restrict(m, [])
    assert gpu_keys(m.collect_metrics()) == []
    m = monitor()
    restrict(m, None)
    assert len(gpu_keys(m.collect_metrics())) == 4 * 5


def test_the_runs_gpus_come_from_the_plan(compose, monkeypatch, tmp_path):
    """A job's GPUs here: the first `gpus` visible (pinned by the sweep's pool or the user), or
    the ones its local workers are pinned to; none on CPU."""
    from distexp.cluster import kinds
    from distexp.config import resolved
    from helpers import fake_driver

    monkeypatch.setattr(resolved, "NVIDIA_GPUS", str(fake_driver(tmp_path, 4)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def ids(*overrides):
        cfg = compose(*overrides)  # planned as the job process plans it
        visible = resolved.visible_gpus()
        return kinds.plan(cfg, Path(tmp_path), resolved.check_gpus(cfg.gpus, visible),
                            visible).gpu_ids()

    assert ids("strategy=one_device", "gpus=1") == ["0"]
    assert ids("strategy=mirrored") == ["0", "1", "2", "3"]
    assert ids("strategy=mirrored", "gpus=0") == []
    assert ids("strategy=ps", "workers=2", "gpus=1") == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")  # what the sweep's pool pins a job to
    assert ids("strategy=one_device", "gpus=1") == ["2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert ids("strategy=multiworker", "workers=2") == ["3", "1"]
