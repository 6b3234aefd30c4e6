"""The performance knobs' config keys: defaults, and one-line errors before TensorFlow."""
from __future__ import annotations

import pytest

from distexp import errors
from distexp.config import checks


def test_knob_defaults(compose):
    cfg = compose()
    assert cfg.steps_per_execution == "auto" and cfg.jit_compile == "auto"
    assert cfg.precision == "float32" and cfg.target_accuracy is None
    assert cfg.progress == "auto"  # a bar on a terminal, plain lines elsewhere
    assert cfg.measure_peak_flops is False  # a benchmark is never MFU's denominator
    assert cfg.dataset.prefetch == -1 and cfg.dataset.threadpool == 0
    assert cfg.dataset.on_device is False
    assert cfg.tracking.system_metrics is True and cfg.tracking.system_metrics_interval == 5.0


@pytest.mark.parametrize("overrides,needle", [
    (["steps_per_execution=fast"], "steps_per_execution: received 'fast'; valid: auto or an "
                                   "integer >= 1"),
    (["steps_per_execution=2.5"], "steps_per_execution: received 2.5; valid: auto"),
    (["steps_per_execution=true"], "steps_per_execution: received True; valid: auto"),
    (["precision=float16"], "precision: received 'float16'; valid: float32, mixed_float16, "
                            "mixed_bfloat16"),
    (["progress=fancy"], "progress: received 'fancy'; valid: auto, bar, lines, quiet"),
    (["dataset.threadpool=-1"], "dataset.threadpool: received -1"),
    (["loop=fit", "dataset.on_device=true"], "dataset.on_device: received true with loop=fit"),
    (["jit_compile=true", "cpu_replicas=2", "gpus=0"], "jit_compile: received true with "
                                                       "cpu_replicas=2"),
    (["tracking.system_metrics_interval=0"], "tracking.system_metrics_interval: received 0"),
])
def test_knob_errors(compose, overrides, needle):
    with pytest.raises(errors.UserError, match=None) as ex:
        checks.validate(compose(*overrides))
    assert needle in str(ex.value)


def test_steps_per_execution_auto_or_int(compose):
    checks.validate(compose("steps_per_execution=auto"))
    cfg = compose("steps_per_execution=5")
    checks.validate(cfg)
    assert cfg.steps_per_execution == 5


def test_good_knobs_validate(compose):
    """Each knob at a valid value beside a refused one: XLA under one_device on a CPU split in two
    (its one replica holds every variable), on-device data with the custom loop, the rest in
    range. The checks accept it and leave every value as given."""
    cfg = compose("steps_per_execution=10", "jit_compile=true", "strategy=one_device",
                  "cpu_replicas=2", "gpus=0", "precision=mixed_bfloat16", "target_accuracy=0.9",
                  "dataset.threadpool=2", "dataset.on_device=true")
    found = checks.validate(cfg)
    assert (found.gpus, found.layout["replicas"]) == (0, 1)  # one_device: one replica
    assert (cfg.steps_per_execution, cfg.jit_compile, cfg.cpu_replicas, cfg.precision,
            cfg.target_accuracy, cfg.dataset.threadpool, cfg.dataset.on_device) == \
        (10, True, 2, "mixed_bfloat16", 0.9, 2, True)
