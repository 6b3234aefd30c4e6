"""GPU code paths: run only where GPUs are visible (skipped on the CPU-only CI machines)."""
from __future__ import annotations

import json

import pytest

from distexp.config.resolved import visible_gpus
from distexp.parity import losses

GPUS = visible_gpus()
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(GPUS == 0, reason="no GPU visible (CUDA_VISIBLE_DEVICES / driver)")]
TINY = ["epochs=1", "steps_per_epoch=5", "warmup_steps=1", "tracking.enabled=false"]


# the same seeded steps on different devices: float32 matmuls on a GPU may use TF32 (10-bit
# mantissa) where the CPU does not, so the per-step losses agree to ~1e-3, not bit for bit;
# another model, batch or data would differ by far more
SAME = ["seed=3", "steps_per_execution=1", "measure_step_split=false", "global_batch_size=64"]
LOSS_REL = 1e-2


def _train(cli, name, *args):
    """(output, per-step losses) of a TINY seeded job."""
    job = cli.cwd / name
    r = cli(*args, f"hydra.run.dir={job}", *SAME, *TINY)
    assert r.returncode == 0, r
    return r, losses(job)


def test_one_gpu_trains(cli):
    """One GPU trains the steps one CPU trains (the same per-step losses) and says it is on it."""
    r, gpu = _train(cli, "gpu", "strategy=one_device", "gpus=1")
    assert "Number of devices: 1  (/gpu:0" in r.stdout
    assert json.loads((cli.cwd / "gpu" / "result.json").read_text())["perf/examples_per_sec"] > 0
    _, cpu = _train(cli, "cpu", "strategy=one_device", "gpus=0")
    assert len(gpu) == 5 and gpu == pytest.approx(cpu, rel=LOSS_REL)


@pytest.mark.skipif(GPUS < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("cdo", ["nccl", "hierarchical_copy", "reduction_to_one_device"])
def test_mirrored_two_gpus(cli, cdo):
    """Two replicas on two GPUs, each cross-device op: the per-step losses of one GPU at the same
    global batch (a reduction that dropped or doubled a replica's gradients would not)."""
    r, two = _train(cli, "two", "strategy=mirrored", "gpus=2", f"strategy.cross_device_ops={cdo}")
    assert "Number of devices: 2  (/gpu:0, /gpu:1" in r.stdout
    _, one = _train(cli, "one", "strategy=one_device", "gpus=1")
    assert len(two) == 5 and two == pytest.approx(one, rel=LOSS_REL)


def test_all_visible_gpus_by_default(cli):
    r = cli("strategy=mirrored", *TINY)
    assert r.returncode == 0, r
    assert f"Number of devices: {GPUS}" in r.stdout


def test_more_gpus_than_visible_is_an_error(cli):
    r = cli(f"gpus={GPUS + 1}", *TINY)
    assert r.returncode == 2
    assert f"gpus: received {GPUS + 1}; {GPUS} GPU(s) visible" in r.stderr


@pytest.mark.skipif(GPUS < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("strategy", ["multiworker", "ps"])
def test_local_workers_train_on_one_gpu_each(cli, strategy):
    """gpus=1 per worker, 2 local workers: each worker process on its own GPU, not the CPU."""
    job = cli.cwd / "job"
    r = cli(f"strategy={strategy}", "workers=2", "gpus=1", f"hydra.run.dir={job}", *TINY)
    assert r.returncode == 0, r
    devices = next(ln for ln in r.stdout.splitlines() if ln.startswith("Number of devices:"))
    assert devices.startswith("Number of devices: 2 "), devices
    if strategy == "multiworker":  # the chief is worker-0: its own replica's device
        assert "(/gpu:0;" in devices, devices
    else:  # the coordinator prints it, on no GPU; each worker server logs what it sees
        for i in range(2):
            log = (job / f"worker-{i}.log").read_text()
            assert f"worker:{i} serving at " in log and " on 1 GPU(s)" in log, log[-2000:]
        assert " on CPU" in (job / "ps-0.log").read_text()


LOGICAL = ["global_batch_size=32", "seed=0", "jit_compile=false", "epochs=1",
           "steps_per_epoch=6", "warmup_steps=1", "tracking.enabled=false"]


@pytest.mark.parametrize("strategy", ["mirrored", "central"])
def test_logical_gpus_train_as_one_replica_with_a_sync(cli, strategy):
    """gpu_replicas=2 on one GPU: two GPU replicas (logical GPUs), the all-reduce named, the
    per-step losses of one replica on the same global batch (float32, rel 1e-3: the sum's order
    differs) and a sync part > 0 in the step-time split (gradients all-reduced on the GPU)."""
    from distexp.parity import losses

    one, two = cli.cwd / "one", cli.cwd / "two"
    r = cli("strategy=one_device", "gpus=1", f"hydra.run.dir={one}", *LOGICAL)
    assert r.returncode == 0, r
    r = cli(f"strategy={strategy}", "gpus=1", "gpu_replicas=2", f"hydra.run.dir={two}", *LOGICAL)
    assert r.returncode == 0, r
    assert "Number of devices: 2  (/gpu:0, /gpu:1" in r.stdout
    assert "gpu_replicas=2: each of 1 GPU(s) is 2 logical GPUs" in r.stdout
    assert len(losses(two)) == 6
    assert losses(two) == pytest.approx(losses(one), rel=1e-3)
    assert json.loads((two / "result.json").read_text())["perf/step_sync_ms"] > 0


def test_the_default_job_on_a_gpu_says_xla_is_on(cli):
    """jit_compile=auto on GPU replicas: XLA on, said in one line."""
    r = cli("strategy=mirrored", "gpus=1", *TINY)
    assert r.returncode == 0, r
    assert "XLA: on (jit_compile=auto: GPU replicas under strategy=mirrored" in r.stdout
