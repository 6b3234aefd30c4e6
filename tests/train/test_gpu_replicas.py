"""gpu_replicas: N logical GPUs per physical GPU (distexp.train.devices), so mirrored, central and
multiworker run N GPU replicas on one card. Decided before TensorFlow (GPUs faked: the NVIDIA
driver's list, a fake nvidia-smi): the replicas and global batch, the all-reduce (never NCCL
there), the memory each logical GPU gets, the job's line, and one-line refusals."""
from __future__ import annotations

import pytest

from distexp import errors, strategies
from distexp.config import checks
from distexp.train import devices


@pytest.mark.parametrize("visible,overrides,per_worker,replicas,batch", [
    (1, ["strategy=mirrored", "gpu_replicas=2"], 2, 2, 128),
    (1, ["strategy=central", "gpu_replicas=3"], 3, 3, 192),
    (2, ["strategy=mirrored", "gpu_replicas=2"], 4, 4, 256),
    (2, ["strategy=multiworker", "workers=2", "gpus=1", "gpu_replicas=2"], 2, 4, 256),
    (1, ["strategy=mirrored"], 1, 1, 64),
])
def test_replicas_are_gpus_times_gpu_replicas(compose, gpus, visible, overrides, per_worker,
                                              replicas, batch):
    gpus(visible)
    cfg = compose(*overrides)
    found = checks.validate(cfg)
    layout = found.layout
    assert (layout["replicas_per_worker"], layout["replicas"], layout["global_batch"]) == \
        (per_worker, replicas, batch)
    assert found.pool_gpus(cfg) == visible  # a sweep's pool holds the physical GPUs


@pytest.mark.parametrize("visible,overrides,line", [
    (1, ["gpu_replicas=0"], "gpu_replicas: received 0; expected >= 1"),
    (1, ["strategy=one_device", "gpu_replicas=2"], "gpu_replicas: received 2 with "
        "strategy=one_device; it splits each GPU into logical GPUs for strategy=mirrored or "
        "central or multiworker: leave it at 1"),
    (0, ["gpu_replicas=2"], "gpu_replicas: received 2; this job trains on CPU (no GPU visible, "
        "or gpus=0): cpu_replicas=2 splits the CPU"),
    (1, ["gpu_replicas=2", "gpus=0"], "gpu_replicas: received 2; this job trains on CPU"),
    (1, ["gpu_replicas=2", "strategy.cross_device_ops=nccl"], "strategy.cross_device_ops: "
        "received 'nccl' with gpu_replicas=2; NCCL refuses two ranks on one GPU: use "
        "reduction_to_one_device (the default with gpu_replicas) or hierarchical_copy"),
    (2, ["strategy=multiworker", "workers=2", "gpus=1", "gpu_replicas=2",
         "strategy.communication=nccl"], "strategy.communication: received 'nccl' with "
        "gpu_replicas=2; NCCL refuses two ranks on one GPU: use auto (ring with gpu_replicas) "
        "or ring"),
    (1, ["gpus=2", "gpu_replicas=2"], "gpus: received 2; 1 GPU(s) visible"),  # unchanged
])
def test_bad_values_are_one_line_before_tensorflow(compose, gpus, visible, overrides, line):
    gpus(visible)
    with pytest.raises(errors.UserError) as ex:
        checks.validate(compose(*overrides))
    assert str(ex.value).startswith(line), str(ex.value)


@pytest.mark.parametrize("overrides,reduce", [
    (["strategy=mirrored", "gpu_replicas=2"], "reduction_to_one_device"),
    (["strategy=mirrored", "gpu_replicas=2", "strategy.cross_device_ops=hierarchical_copy"],
     "hierarchical_copy"),
    (["strategy=multiworker", "gpu_replicas=2"], "ring"),
    (["strategy=central", "gpu_replicas=2"], "the variables' one device (CentralStorageStrategy)"),
])
def test_the_line_names_the_all_reduce_that_works_on_logical_gpus(compose, overrides, reduce):
    cfg = compose(*overrides)
    assert devices.split_line(cfg, 1) == (
        "gpu_replicas=2: each of 1 GPU(s) is 2 logical GPUs (90% of its memory shared out "
        f"equally); all-reduce: {reduce} (NCCL refuses two ranks on one GPU)")
    assert devices.split_line(compose(overrides[0]), 1) is None  # gpu_replicas=1: no line


def test_multiworker_builds_ring_collectives_on_logical_gpus(compose):
    rec = strategies.of(compose("strategy=multiworker", "gpu_replicas=2"))
    assert rec._communication(compose("strategy=multiworker", "gpu_replicas=2")) == "ring"
    assert rec._communication(compose("strategy=multiworker")) == "auto"
