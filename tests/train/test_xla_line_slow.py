"""The job's XLA line and its records (distexp.train.trainer, from the facts distexp.config.xla
resolved): one line saying what it chose and why, the param `jit_compile_resolved` and the tag
`distexp.jit_compile`. A tiny CPU job (XLA forced: on this CPU auto leaves it off)."""
from __future__ import annotations

import pytest

from distexp.tracking import tags
from helpers import mlflow_runs

pytestmark = [pytest.mark.slow]


def test_the_job_says_and_logs_what_xla_it_chose(cli):
    r = cli("strategy=one_device", "gpus=0", "jit_compile=true", "epochs=1",
            "steps_per_epoch=3", "warmup_steps=1", "measure_peak_flops=false",
            "checkpoint.every_steps=0")
    assert r.returncode == 0, r
    assert "XLA: on (jit_compile=true)\n" in r.stdout
    _, (run,) = mlflow_runs(cli.uri)
    assert run.data.params["jit_compile"] == "True"  # the key as given
    assert run.data.params["jit_compile_resolved"] == "True"  # what the job chose
    assert run.data.tags[tags.JIT_COMPILE] == "XLA: on (jit_compile=true)"
