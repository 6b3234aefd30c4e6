"""ps with mixed_float16 scales the loss (one step in a probe process, TensorFlow, no CLI).
Tier: integration."""
from __future__ import annotations

import pytest

from helpers import run_probe

pytestmark = pytest.mark.integration


def test_ps_mixed_float16_scales_the_loss():
    """One ps step with SGD behind a LossScaleOptimizer updates the weights by lr x gradient:
    the loss was scaled before the gradient and unscaled in apply_gradients. The control skips
    the scaling (the old ps loop's bug): the update is then 2**-15 too small."""
    good = run_probe("ps_loss_scale_probe.py", tests=False)
    assert good["scale"] == 2.0 ** 15 and good["steps"] == 1
    assert good["ratio"] == pytest.approx(1.0, rel=1e-3)
    assert good["loss"] == pytest.approx(good["float32_loss"], rel=1e-3)
    bad = run_probe("ps_loss_scale_probe.py", tests=False, PROBE_SKIP_SCALING="1")
    assert bad["ratio"] == pytest.approx(2.0 ** -15, rel=1e-2)
