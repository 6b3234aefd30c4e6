"""benchmarks/gpu.sh (the one device run): the sweeps it would run compose and pass distexp's
checks for a 1-GPU and a 4-GPU machine (faked), with what each job resolves (replicas, batch, XLA,
the XLA step's shape); its table's figures and ratios from given runs. Where there is no GPU:
tests/benchmarks/test_gpu_script_integration.py."""
from __future__ import annotations

import importlib.util
import re

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
            facts["global_batch"] // facts["replicas"], facts["jit_compile"], cfg.xla_step
    finally:
        GlobalHydra.instance().clear()


def _gpus(tmp_path, monkeypatch, n):
    """This machine shows `n` GPUs (the driver's list faked), none hidden."""
    from distexp.config import resolved
    from helpers import fake_driver

    monkeypatch.setattr(resolved, "NVIDIA_GPUS", str(fake_driver(tmp_path / f"driver-{n}", n)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


F32, F16, BF16 = "float32", "mixed_float16", "mixed_bfloat16"
IMAGE = ("resnet50", (224, 224, 3))


def test_the_parts_compose_for_one_gpu(tmp_path, monkeypatch):
    """One H200: the default (XLA on by auto) at 3 precisions x batch 64, 256; jit_compile=false
    at batch 64; the whole XLA step at 256; 2 logical GPUs; no strong sweep (one GPU)."""
    gpu = _gpu_module()
    _gpus(tmp_path, monkeypatch, 1)
    z = gpu.Sizes()
    got = {}
    for part in gpu.parts(1, z):
        jobs = _jobs(tmp_path / re.sub(r"\W", "_", part.label), gpu.sweep_args(part, z, 1))
        got[part.label] = {_facts(tmp_path, job) for job in jobs}
    assert list(got) == [gpu.DEFAULT, gpu.NO_XLA, gpu.WHOLE, gpu.LOGICAL]
    assert got[gpu.DEFAULT] == {(p, *IMAGE, 1, b, True, "split") for p in (F32, F16, BF16)
                                for b in (64, 256)}
    assert got[gpu.NO_XLA] == {(p, *IMAGE, 1, 64, False, "split") for p in (F32, F16, BF16)}
    assert got[gpu.WHOLE] == {(p, *IMAGE, 1, 256, True, "whole") for p in (F32, F16)}
    assert got[gpu.LOGICAL] == {(F32, *IMAGE, 2, 64, True, "split")}


def test_the_parts_compose_for_four_gpus(tmp_path, monkeypatch):
    gpu = _gpu_module()
    _gpus(tmp_path, monkeypatch, 4)
    z = gpu.Sizes(precisions=(F32,), batches=(64,))
    default, *_, strong = gpu.parts(4, z)
    assert strong.label == gpu.STRONG
    weak = {_facts(tmp_path, j) for j in _jobs(tmp_path / "w", gpu.sweep_args(default, z, 4))}
    assert weak == {(F32, *IMAGE, n, 64, True, "split") for n in (1, 2, 3, 4)}
    # global batch 256: the GPU counts that divide it (3 does not)
    strong = {_facts(tmp_path, j) for j in _jobs(tmp_path / "s", gpu.sweep_args(strong, z, 4))}
    assert strong == {(F32, *IMAGE, n, 256 // n, True, "split") for n in (1, 2, 4)}


def _bench_row(what, precision, batch, rate, gpus=1, xla=True, **kw):
    return dict(dict(what=what, precision=precision, batch=batch, rate=rate, gpus=gpus, xla=xla,
                     status="FINISHED", ci95=None, mfu=None, peak=None, split=[None] * 4,
                     peak_source=None), **kw)


def test_the_table_figures_and_ratios():
    gpu = _gpu_module()
    runs = [_bench_row(gpu.DEFAULT, F32, 64, 2000.0, mfu=0.10, peak=494.5e12, ci95=20.0,
                 split=[6.6, 24.4, 0.0, 1.2], peak_source="sheet"),
            _bench_row(gpu.DEFAULT, F32, 256, 2400.0),
            _bench_row(gpu.NO_XLA, F32, 64, 700.0, xla=False, mfu=0.035, peak=494.5e12),
            _bench_row(gpu.WHOLE, F32, 256, 2640.0),
            _bench_row(gpu.LOGICAL, F32, 64, 3000.0, gpus=2, split=[1.0, 30.0, 4.5, 0.5]),
            _bench_row(gpu.DEFAULT, F16, 64, None, status="FAILED")]
    anchor = gpu.anchor_rows([
        {"precision": F32, "jit_compile": "auto", "xla": True, "examples_per_sec": 2500.0,
         "batch": 64},
        {"precision": F32, "jit_compile": "auto", "xla": True, "examples_per_sec": 2000.0,
         "batch": 256},
        {"precision": F32, "jit_compile": "false", "xla": False, "examples_per_sec": 875.0,
         "batch": 64}], runs)
    lines = gpu.table(runs + anchor)
    rows = [ln.split() for ln in lines[1:10]]
    assert rows[0] == ["distexp", "default", F32, "yes", "1", "64", "2000.0", "+/-", "20.0",
                       "100%", "10.0%", "494", "6.6/24.4/0.0/1.2"]
    assert rows[1] == ["distexp", "default", F32, "yes", "1", "256", "2400.0", "100%", "n/a",
                       "n/a", "-"]
    assert rows[2] == ["distexp", "default", F16, "yes", "1", "64", "FAILED"]
    # the anchor's MFU: distexp's 1-GPU MFU of the same precision, batch and XLA, scaled by rates
    assert rows[3] == ["Keras", "fit", "auto", F32, "yes", "1", "64", "2500.0", "-", "12.5%",
                       "494", "-"]
    assert rows[4][:8] == ["Keras", "fit", "auto", F32, "yes", "1", "256", "2000.0"]
    assert rows[5] == ["distexp", "jit=false", F32, "no", "1", "64", "700.0", "100%", "3.5%",
                       "494", "-"]
    assert rows[6] == ["Keras", "fit", "false", F32, "no", "1", "64", "875.0", "-", "4.4%", "494",
                       "-"]
    assert rows[7][:7] == ["distexp", "xla_step=whole", F32, "yes", "1", "256", "2640.0"]
    # 2 logical GPUs: efficiency over the default's 1-replica rate, same precision and batch
    assert rows[8] == ["distexp", "gpu_replicas=2", F32, "yes", "2", "64", "3000.0", "75%", "n/a",
                       "n/a", "1.0/30.0/4.5/0.5"]
    assert lines[10:] == [
        "distexp default / Keras fit default (auto): float32 b64 0.80x, float32 b256 1.20x",
        "distexp / Keras fit, both jit_compile=false: float32 b64 0.80x",
        "xla_step whole / split (distexp default): float32 b256 1.10x",
        "peak: sheet"]
    assert gpu.build_line({"tensorflow": "2.21.0", "cuda_version": "12.5", "cudnn_version": "9"}) \
        == "build: TensorFlow 2.21.0 (cuda_version 12.5, cudnn_version 9)"


def test_the_smoke_run_is_tiny_on_the_cpu_and_leaves_out_the_gpu_only_parts(tmp_path):
    gpu = _gpu_module()
    default, no_xla, whole, logical = gpu.parts(0, gpu.SMOKE)
    assert (whole.gpu_only, logical.gpu_only, default.gpu_only, no_xla.gpu_only) == \
        (True, True, False, False)
    got = set()
    for part in (default, no_xla):
        jobs = _jobs(tmp_path / re.sub(r"\W", "_", part.label), gpu.sweep_args(part, gpu.SMOKE, 0))
        assert all("gpus=0" in job for job in jobs)
        got |= {_facts(tmp_path, job) for job in jobs}
    assert got == {(F32, "resnet50", (32, 32, 3), 1, 4, False, "split")}  # auto: off on CPU
    assert gpu.anchor_args(gpu.SMOKE, "auto")[1:] == [
        "--precisions=float32", "--batches=4", "--shape=32,32,3", "--classes=10", "--size=8",
        "--steps=2", "--warmup=1", "--jit-compile=auto"]
    assert gpu.anchor_args(gpu.Sizes(), "false")[2] == "--batches=64"  # like for like: batch 64
