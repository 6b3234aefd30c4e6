"""benchmarks/gpu.sh (GPU readiness in one command): the sweeps it would run compose and pass
distexp's checks for a 4-GPU machine; its table's figures from given runs. Where there is no GPU:
tests/benchmarks/test_gpu_script_integration.py."""
from __future__ import annotations

import importlib.util

import pytest

from helpers import ROOT
from helpers import sweeper as _sweeper


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

    from distexp.config import checks


    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "distexp" / "conf")):
            cfg = compose(config_name="config", overrides=job)
        facts = checks.validate(cfg).layout
        return cfg.precision, cfg.model.name, tuple(cfg.dataset.shape), facts["replicas"], \
            facts["global_batch"]
    finally:
        GlobalHydra.instance().clear()


@pytest.fixture
def four_gpus(tmp_path, monkeypatch):
    """This machine shows 4 GPUs (the driver's list faked), none hidden."""
    from distexp.config import resolved
    from helpers import fake_driver

    monkeypatch.setattr(resolved, "NVIDIA_GPUS", str(fake_driver(tmp_path / "driver", 4)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_the_benchmark_sweeps_compose_for_four_gpus(tmp_path, four_gpus):
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
    run = dict(what="distexp weak", global_batch="64", status="FINISHED", ci95=None,
               peak_source="sheet", split=[None] * 4, xla=False)
    runs = [dict(run, precision="float32", gpus=1, rate=100.0, mfu=0.30, peak=989e12 / 2,
                 split=[6.6, 84.4, 0.0, 1.2]),
            dict(run, precision="float32", gpus=2, rate=180.0, mfu=0.27, peak=989e12),
            dict(run, precision="float32", gpus=1, rate=300.0, mfu=0.90, peak=989e12 / 2,
                 xla=True),
            dict(run, precision="mixed_float16", gpus=2, rate=500.0, mfu=None, peak=None),
            dict(run, precision="mixed_float16", gpus=1, rate=None, mfu=None, peak=None,
                 status="FAILED")]
    anchor = gpu.anchor_rows([{"precision": "float32", "jit_compile": False,
                               "examples_per_sec": 80.0, "batch": 64},
                              {"precision": "float32", "jit_compile": True,
                               "examples_per_sec": 250.0, "batch": 64},
                              {"precision": "mixed_float16", "jit_compile": False,
                               "examples_per_sec": 90.0, "batch": 64}], runs)
    lines = gpu.table(runs + anchor)
    assert lines[1].split() == ["distexp", "weak", "float32", "no", "1", "64", "100.0", "100%",
                                "30.0%", "494", "6.6/84.4/0.0/1.2"]
    assert lines[2].split() == ["distexp", "weak", "float32", "no", "2", "64", "180.0", "90%",
                                "27.0%", "989", "-"]
    # XLA's job is its own set-up: its 1-GPU rate is not the no-XLA one's
    assert lines[3].split() == ["distexp", "weak", "float32", "yes", "1", "64", "300.0", "100%",
                                "90.0%", "494", "-"]
    assert lines[4].split() == ["distexp", "weak", "mixed_float16", "no", "1", "64", "FAILED"]
    # no 1-GPU figure to compare with: no efficiency, never a guess
    assert lines[5].split() == ["distexp", "weak", "mixed_float16", "no", "2", "64", "500.0",
                                "n/a", "n/a", "n/a", "-"]
    # the anchor: its MFU is distexp's 1-GPU MFU of the same precision and jit_compile, scaled
    # by the rates (same model, same peak)
    assert lines[6].split() == ["Keras", "fit", "(hand-written)", "float32", "no", "1", "64",
                                "80.0", "-", "24.0%", "494", "-"]
    assert lines[7].split() == ["Keras", "fit", "(hand-written)", "float32", "yes", "1", "64",
                                "250.0", "-", "75.0%", "494", "-"]
    assert lines[8].split() == ["Keras", "fit", "(hand-written)", "mixed_float16", "no", "1",
                                "64", "90.0", "-", "n/a", "n/a", "-"]
    # each ratio compares one jit_compile with the same: never XLA against no XLA
    assert lines[9:] == ["distexp (1 GPU) / Keras fit (hand-written), same model, batch and "
                         "jit_compile: float32 1.25x, float32 xla 1.20x", "peak: sheet"]


def test_the_strong_sweep_is_skipped_only_where_it_repeats_the_weak_one():
    gpu = _gpu_module()
    assert gpu.strong_repeats_weak(1) and gpu.strong_repeats_weak(0, 4)  # one GPU; --smoke's CPU
    assert not gpu.strong_repeats_weak(2) and not gpu.strong_repeats_weak(4)
    assert not gpu.strong_repeats_weak(1, 64, global_batch=128)  # another batch: not a repeat


def test_the_smoke_sweep_and_anchor_are_tiny_and_on_the_cpu(tmp_path):
    gpu = _gpu_module()
    jobs = _jobs(tmp_path, gpu.sweep_args("weak", 0, sizes=gpu.SMOKE))
    assert {_facts(tmp_path, job) for job in jobs} == {
        (p, "resnet50", (32, 32, 3), 1, 4) for p in ("float32", "mixed_float16")}
    assert all("gpus=0" in job for job in jobs)
    assert gpu.anchor_args(gpu.SMOKE)[1:] == [
        "--precisions=float32,mixed_float16", "--batch=4", "--shape=32,32,3", "--classes=10",
        "--size=8", "--steps=2", "--warmup=1", "--jit-compile=false"]
    assert all("jit_compile=False" in job for job in jobs)  # both sides: distexp's default
