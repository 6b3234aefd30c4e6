"""GPU readiness in one command (`bash benchmarks/gpu.sh`, or `python benchmarks/gpu.py`).

On a machine with NVIDIA GPUs, run from the directory the results should go to (its `outputs/`):
1. the GPU test tier: `python -m pytest -m gpu tests/` (tests/test_gpu.py and the other `gpu` tests);
2. a mirrored scaling benchmark, ResNet-50 (keras.applications, weights=None) on synthetic
   224x224x3 images of 1000 classes, `gpus=1..N` (N: every visible GPU), at `precision=float32`
   and `precision=mixed_float16`, as two distexp sweeps in MLflow experiment `gpu-benchmark`:
   - weak scaling: `batch_size_per_replica` fixed (--batch, 64): the global batch grows with N;
   - strong scaling: `global_batch_size` fixed (--global-batch, default --batch x N), over the GPU
     counts that divide it;
3. per sweep, a table read back from MLflow: examples/s (+/- its 95 % interval), the scaling
   efficiency (examples/s over N x the 1-GPU job's of the same sweep and precision) and MFU (the
   job's `perf/mfu`: model FLOPs x examples/s over the summed datasheet peak of its GPUs,
   `perf/peak_flops`, distexp.figures.peaks; none where the GPU has no datasheet figure).

Exit status: 0 when the tier and both sweeps passed, else 1. Without an NVIDIA GPU (none under
/proc/driver/nvidia/gpus, or CUDA_VISIBLE_DEVICES hides them all): one line, exit 0.
No TensorFlow in this process: the jobs import it.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "gpu-benchmark"
PRECISIONS = ("float32", "mixed_float16")
SWEEP_LINE = re.compile(r"^Sweep (\S+)(?: \(resumed\))?: MLflow parent run")


def child_env() -> dict:
    """The environment of the tests and sweeps: this checkout's distexp first."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path)


def gpu_counts(gpus: int, global_batch: Optional[int] = None) -> List[int]:
    """1..gpus; with a fixed global batch, only the counts that divide it."""
    return [n for n in range(1, gpus + 1) if global_batch is None or global_batch % n == 0]


def sweep_args(mode: str, gpus: int, batch: int = 64, global_batch: Optional[int] = None,
               steps: int = 60, warmup: int = 10) -> List[str]:
    """The `python -m distexp` arguments of one sweep: mode "weak" (batch per replica fixed) or
    "strong" (global batch fixed, default batch x gpus)."""
    if mode == "weak":
        counts, batch_key = gpu_counts(gpus), f"batch_size_per_replica={batch}"
        largest = batch * gpus
    else:
        global_batch = global_batch or batch * gpus
        counts, batch_key = gpu_counts(gpus, global_batch), f"global_batch_size={global_batch}"
        largest = global_batch
    return ["-m", "strategy=mirrored", "model=resnet50", "dataset=synthetic",
            "dataset.shape=[224,224,3]", "dataset.num_classes=1000",
            f"dataset.size={2 * largest}",  # two global batches in memory, repeated
            f"gpus={','.join(map(str, counts))}", batch_key,
            f"precision={','.join(PRECISIONS)}", "epochs=1", f"steps_per_epoch={steps}",
            f"warmup_steps={warmup}", f"tracking.experiment={EXPERIMENT}"]


def no_gpu_line() -> Optional[str]:
    """The one line to print where no NVIDIA GPU is visible, else None."""
    sys.path.insert(0, str(ROOT))
    from distexp.config.resolved import visible_gpus

    if visible_gpus() > 0:
        return None
    return ("gpu.sh: no NVIDIA GPU visible (no GPU under /proc/driver/nvidia/gpus, or "
            "CUDA_VISIBLE_DEVICES hides them): nothing to run")


def run_sweep(args: Sequence[str]) -> Optional[str]:
    """Run one sweep, its output streamed through; its sweep id (None if it never started)."""
    sweep_id = None
    p = subprocess.Popen([sys.executable, "-m", "distexp", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, bufsize=1, env=child_env())
    for line in p.stdout:
        sys.stdout.write(line)
        m = SWEEP_LINE.match(line)
        if m and sweep_id is None:
            sweep_id = m.group(1)
    p.wait()
    return sweep_id


def sweep_runs(sweep_id: str, uri: str) -> List[dict]:
    """The sweep's job runs: precision, GPUs, global batch, status and the perf figures."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], f"tags.`distexp.sweep_id` = '{sweep_id}' "
                              "and tags.`distexp.run_kind` = 'job'", max_results=1000)
    return [{"precision": r.data.params.get("precision"),
             "gpus": int(r.data.params.get("num_replicas", 0)),
             "global_batch": r.data.params.get("global_batch_size"), "status": r.info.status,
             "rate": r.data.metrics.get("perf/examples_per_sec"),
             "ci95": r.data.metrics.get("perf/examples_per_sec_ci95"),
             "mfu": r.data.metrics.get("perf/mfu"), "peak": r.data.metrics.get("perf/peak_flops"),
             "peak_source": r.data.tags.get("distexp.peak_source")} for r in runs]


def table(runs: Sequence[dict]) -> List[str]:
    """One line per (precision, GPUs): examples/s, efficiency over 1 GPU, MFU, peak."""
    ones: Dict[str, float] = {r["precision"]: r["rate"] for r in runs
                              if r["gpus"] == 1 and r["status"] == "FINISHED" and r["rate"]}
    out = [f"{'precision':<14} {'gpus':>4} {'global batch':>12} {'examples/s':>18} "
           f"{'efficiency':>10} {'MFU':>7} {'peak TFLOP/s':>12}"]
    for r in sorted(runs, key=lambda r: (r["precision"] or "", r["gpus"])):
        if r["status"] != "FINISHED" or not r["rate"]:
            out.append(f"{r['precision'] or '?':<14} {r['gpus']:>4} {r['global_batch'] or '?':>12} "
                       f"{r['status']:>18}")
            continue
        rate = f"{r['rate']:.1f}" + (f" +/- {r['ci95']:.1f}" if r["ci95"] else "")
        one = ones.get(r["precision"])
        eff = f"{r['rate'] / (r['gpus'] * one):.0%}" if one else "n/a"
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a"
        peak = f"{r['peak'] / 1e12:.0f}" if r["peak"] else "n/a"
        out.append(f"{r['precision']:<14} {r['gpus']:>4} {r['global_batch']:>12} {rate:>18} "
                   f"{eff:>10} {mfu:>7} {peak:>12}")
    sources = sorted({r["peak_source"] for r in runs if r["peak_source"]})
    out += [f"peak: {s}" for s in sources] or ["peak: none known for these GPUs: no MFU"]
    return out


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bash benchmarks/gpu.sh", description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=64, help="batch per replica (weak scaling)")
    p.add_argument("--global-batch", type=int, default=None,
                   help="global batch (strong scaling; default: --batch x GPUs)")
    p.add_argument("--steps", type=int, default=60, help="training steps per job")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps (not timed)")
    p.add_argument("--skip-tests", action="store_true", help="only the benchmark")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(argv)
    line = no_gpu_line()
    if line is not None:
        print(line, flush=True)
        return 0
    from distexp.config.resolved import visible_gpus

    gpus, failed = visible_gpus(), []
    if not args.skip_tests:
        print(f"== GPU test tier: python -m pytest -m gpu ({gpus} GPU(s))", flush=True)
        if subprocess.call([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "gpu",
                            str(ROOT / "tests")], env=child_env()) != 0:
            failed.append("GPU test tier")
    uri = f"sqlite:///{Path.cwd() / 'outputs' / 'mlflow.db'}"
    for mode, what in (("weak", f"batch per replica {args.batch}"),
                       ("strong", f"global batch {args.global_batch or args.batch * gpus}")):
        sweep = sweep_args(mode, gpus, args.batch, args.global_batch, args.steps, args.warmup)
        print(f"== {mode} scaling, {what}: python -m distexp {' '.join(sweep)}", flush=True)
        sweep_id = run_sweep(sweep)
        runs = sweep_runs(sweep_id, uri) if sweep_id else []
        if not runs or any(r["status"] != "FINISHED" for r in runs):
            failed.append(f"{mode} scaling sweep")
        print(f"== mirrored ResNet-50, synthetic 224x224x3, {mode} scaling ({what}), "
              f"sweep {sweep_id}", flush=True)
        print("\n".join(table(runs)), flush=True)
    if failed:
        print(f"gpu.sh: failed: {', '.join(failed)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
