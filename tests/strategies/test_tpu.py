"""strategy=tpu (TPUStrategy through TPUClusterResolver). Here, without a TPU: one line before
TensorFlow starts. On a machine with a TPU (TPU_NAME set, or a TPU VM's /dev/accel*): it trains."""
from __future__ import annotations

import os

import pytest

from distexp import errors
from distexp.strategies.tpu import local_tpu
from helpers import run_in_process

HAS_TPU = bool(os.environ.get("TPU_NAME")) or local_tpu()


@pytest.mark.skipif(HAS_TPU, reason="this machine has a TPU")
def test_no_tpu_is_one_line_before_tensorflow(tmp_path):
    r = run_in_process(["strategy=tpu", "epochs=1"], tmp_path, env={"TPU_NAME": ""})
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r
    assert lines[0].startswith("distexp: error: strategy: received 'tpu', but no TPU is reachable"), r
    assert "Strategy:" not in r.stdout


@pytest.mark.parametrize("overrides,needle", [
    (["strategy=tpu", "strategy.tpu=my-tpu", "loop=fit"],
     "loop: received 'fit' with strategy=tpu; Keras 3 fit under TPUStrategy"),
    (["strategy=tpu", "strategy.tpu=my-tpu", "precision=mixed_float16"],
     "precision: received 'mixed_float16' with strategy=tpu; TPUs compute in bfloat16"),
    (["strategy=mirrored", "strategy.tpu=my-tpu"],
     "strategy.tpu: received 'my-tpu' with strategy=mirrored; it applies to strategy=tpu only"),
])
def test_tpu_refusals(compose, overrides, needle):
    from distexp.config import checks

    with pytest.raises(errors.UserError) as err:
        checks.validate(compose(*overrides))
    assert str(err.value).startswith(needle), err.value
