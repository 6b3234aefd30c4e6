"""benchmarks/gpu.sh (GPU readiness in one command): the sweeps it would run compose and pass
distexp's checks for a 4-GPU machine; its table's figures from given runs. Where there is no GPU:
tests/test_gpu_script_integration.py."""
from __future__ import annotations

import importlib.util

from helpers import ROOT, sweeper as _sweeper

def _gpu_module():
    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "benchmarks" / "gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jobs(tmp_path, args):
    """The jobs the real sweeper launches for `python -m distexp <args>` (recorded, not run)."""
    from hydra.core.global_hydra import GlobalHydra

    assert args[0] == "-m"
    try:
        sweeper = _sweeper(tmp_path)
        sweeper.sweep(list(args[1:]))
        return [ovr for _, ovr in sweeper.launcher.launched]
    finally:
        GlobalHydra.instance().clear()


def _facts(tmp_path, job):
    """The job's config composed as the job would be, checked, and its facts."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from distexp.config import checks, resolved

    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "distexp" / "conf")):
            cfg = compose(config_name="config", overrides=job)
        checks.validate(cfg)
        facts = resolved.resolve(cfg, int(cfg.gpus))
        return cfg.precision, cfg.model.name, tuple(cfg.dataset.shape), facts["replicas"], \
            facts["global_batch"]
    finally:
        GlobalHydra.instance().clear()


def test_the_benchmark_sweeps_compose_for_four_gpus(tmp_path):
    gpu = _gpu_module()
    weak = _jobs(tmp_path / "weak", gpu.sweep_args("weak", 4))
    strong = _jobs(tmp_path / "strong", gpu.sweep_args("strong", 4))
    got = {_facts(tmp_path, job) for job in weak}
    assert got == {(p, "resnet50", (224, 224, 3), n, 64 * n)
                   for p in ("float32", "mixed_float16") for n in (1, 2, 3, 4)}
    # global batch 256: the GPU counts that divide it (3 does not)
    got = {_facts(tmp_path, job) for job in strong}
    assert got == {(p, "resnet50", (224, 224, 3), n, 256)
                   for p in ("float32", "mixed_float16") for n in (1, 2, 4)}
    assert len(weak) == 8 and len(strong) == 6


def test_the_table_figures():
    gpu = _gpu_module()
    run = dict(global_batch="64", status="FINISHED", ci95=None, peak_source="sheet")
    runs = [dict(run, precision="float32", gpus=1, rate=100.0, mfu=0.30, peak=989e12 / 2),
            dict(run, precision="float32", gpus=2, rate=180.0, mfu=0.27, peak=989e12),
            dict(run, precision="mixed_float16", gpus=2, rate=500.0, mfu=None, peak=None),
            dict(run, precision="mixed_float16", gpus=1, rate=None, mfu=None, peak=None,
                 status="FAILED")]
    lines = gpu.table(runs)
    assert lines[1].split() == ["float32", "1", "64", "100.0", "100%", "30.0%", "494"]
    assert lines[2].split() == ["float32", "2", "64", "180.0", "90%", "27.0%", "989"]
    assert lines[3].split() == ["mixed_float16", "1", "64", "FAILED"]
    # no 1-GPU figure to compare with: no efficiency, never a guess
    assert lines[4].split() == ["mixed_float16", "2", "64", "500.0", "n/a", "n/a", "n/a"]
    assert lines[5:] == ["peak: sheet"]
