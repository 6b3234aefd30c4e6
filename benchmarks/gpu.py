"""GPU readiness in one command (`bash benchmarks/gpu.sh`, or `python benchmarks/gpu.py`).

On a machine with NVIDIA GPUs, run from the directory the results should go to (its `outputs/`):
1. the GPU test tier: `python -m pytest -m gpu tests/` (tests/cluster/test_gpu.py and the other `gpu` tests);
2. a mirrored scaling benchmark, ResNet-50 (keras.applications, weights=None) on synthetic
   224x224x3 images of 1000 classes, `gpus=1..N` (N: every visible GPU), at `precision=float32`
   and `precision=mixed_float16`, as distexp sweeps in MLflow experiment `gpu-benchmark`:
   - weak scaling: `batch_size_per_replica` fixed (--batch, 64): the global batch grows with N;
   - strong scaling: `global_batch_size` fixed (--global-batch, default --batch x N), over the GPU
     counts that divide it; skipped where its jobs are the weak sweep's (one GPU);
3. the anchor: the same model, data and batch in a hand-written Keras fit on one GPU at both
   precisions (benchmarks/keras_anchor.py), what distexp's 1-GPU figures compare with;
   both sides at the same `jit_compile`: false (distexp's default), and with `--xla` true as well
   (Keras fit's own default, "auto", is XLA on one GPU without a strategy: left at it, the anchor
   measured XLA against distexp without it);
4. one table read back from MLflow: per job examples/s (+/- its 95 % interval), the scaling
   efficiency (examples/s over N x the 1-GPU job's of the same sweep and precision), MFU (the
   job's `perf/mfu` over `perf/peak_flops`: datasheet or measured, docs/gpus.md) and the step-time
   split (input/compute/sync/other ms); the anchor's rows beside them (its MFU: distexp's 1-GPU
   job's, scaled by the two rates: same model, same peak), and distexp over Keras fit per
   precision and jit_compile.

With one GPU and the defaults (60 steps, 10 of them warm-up) it takes ~4.5 minutes (267 s on an
H200, 2026-11-28): the tier, two ~35 s jobs, the anchor. `--smoke`: tiny sizes on the CPU (no GPU
needed, no test tier): the same sweeps, anchor and table, to check the script itself
(tests/benchmarks/test_gpu_script_slow.py).

Exit status: 0 when the tier, the sweeps and the anchor passed, else 1. Without an NVIDIA GPU
(none under /proc/driver/nvidia/gpus, or CUDA_VISIBLE_DEVICES hides them) and without --smoke:
one line, exit 0. No TensorFlow in this process: the jobs and the anchor import it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "gpu-benchmark"
PRECISIONS = ("float32", "mixed_float16")
SWEEP_LINE = re.compile(r"^Sweep (\S+)(?: \(resumed\))?: MLflow parent run")
ANCHOR = "Keras fit (hand-written)"
SPLIT = ("perf/step_input_ms", "perf/step_compute_ms", "perf/step_sync_ms", "perf/step_other_ms")


class Sizes(NamedTuple):
    """The benchmark's model input and run length (--smoke: tiny, on the CPU)."""
    shape: Tuple[int, int, int] = (224, 224, 3)
    classes: int = 1000
    batch: int = 64
    global_batch: Optional[int] = None
    steps: int = 60
    warmup: int = 10
    xla: Tuple[str, ...] = ("false",)  # jit_compile of both sides (--xla: false and true)


SMOKE = Sizes(shape=(32, 32, 3), classes=10, batch=4, steps=2, warmup=1)


def child_env() -> dict:
    """The environment of the tests and sweeps: this checkout's distexp first."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path)


def gpu_counts(gpus: int, global_batch: Optional[int] = None) -> List[int]:
    """1..gpus; with a fixed global batch, only the counts that divide it; [0] on the CPU."""
    if gpus == 0:
        return [0]
    return [n for n in range(1, gpus + 1) if global_batch is None or global_batch % n == 0]


def sweep_jobs(mode: str, gpus: int, batch: int = 64,
               global_batch: Optional[int] = None) -> List[Tuple[int, int]]:
    """(GPUs, global batch) of each job of the weak or strong sweep (per precision)."""
    if mode == "weak":
        return [(n, batch * max(n, 1)) for n in gpu_counts(gpus)]
    global_batch = global_batch or batch * max(gpus, 1)
    return [(n, global_batch) for n in gpu_counts(gpus, global_batch)]


def strong_repeats_weak(gpus: int, batch: int = 64, global_batch: Optional[int] = None) -> bool:
    """The strong sweep's jobs are the weak sweep's (one GPU, the default global batch): skip it."""
    return set(sweep_jobs("strong", gpus, batch, global_batch)) <= set(sweep_jobs("weak", gpus, batch))


def sweep_args(mode: str, gpus: int, batch: int = 64, global_batch: Optional[int] = None,
               steps: int = 60, warmup: int = 10, sizes: Optional[Sizes] = None) -> List[str]:
    """The `python -m distexp` arguments of one sweep: mode "weak" (batch per replica fixed) or
    "strong" (global batch fixed, default batch x gpus). `gpus=0`: one CPU replica (--smoke)."""
    z = sizes or Sizes(batch=batch, global_batch=global_batch, steps=steps, warmup=warmup)
    jobs = sweep_jobs(mode, gpus, z.batch, z.global_batch)
    if mode == "weak":
        batch_key = f"batch_size_per_replica={z.batch}"
    else:
        batch_key = f"global_batch_size={jobs[0][1]}"
    largest = max(g for _, g in jobs)
    return ["-m", "strategy=mirrored", "model=resnet50", "dataset=synthetic",
            f"dataset.shape=[{','.join(map(str, z.shape))}]", f"dataset.num_classes={z.classes}",
            f"dataset.size={2 * largest}",  # two global batches in memory, repeated
            f"gpus={','.join(str(n) for n, _ in jobs)}", batch_key,
            f"precision={','.join(PRECISIONS)}", f"jit_compile={','.join(z.xla)}",
            "epochs=1", f"steps_per_epoch={z.steps}",
            f"warmup_steps={z.warmup}", f"tracking.experiment={EXPERIMENT}"]


def anchor_args(sizes: Sizes) -> List[str]:
    """benchmarks/keras_anchor.py's arguments: the same model, data, batch and steps, one device."""
    return [str(ROOT / "benchmarks" / "keras_anchor.py"), f"--precisions={','.join(PRECISIONS)}",
            f"--batch={sizes.batch}", f"--shape={','.join(map(str, sizes.shape))}",
            f"--classes={sizes.classes}", f"--size={2 * sizes.batch}", f"--steps={sizes.steps}",
            f"--warmup={sizes.warmup}", f"--jit-compile={','.join(sizes.xla)}"]


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


def run_anchor(sizes: Sizes) -> List[dict]:
    """The hand-written Keras fit at each precision: its JSON lines (the rest streamed through)."""
    out = []
    p = subprocess.Popen([sys.executable, *anchor_args(sizes)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, bufsize=1, env=child_env())
    for line in p.stdout:
        if line.startswith("{"):
            out.append(json.loads(line))
        else:
            sys.stdout.write(line)
    p.wait()
    return out if p.returncode == 0 else []


def sweep_runs(sweep_id: str, uri: str, what: str = "distexp") -> List[dict]:
    """The sweep's job runs: precision, GPUs, global batch, status and the perf figures."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], f"tags.`distexp.sweep_id` = '{sweep_id}' "
                              "and tags.`distexp.run_kind` = 'job'", max_results=1000)
    return [{"what": what, "precision": r.data.params.get("precision"),
             "xla": str(r.data.params.get("jit_compile")).lower() == "true",
             "gpus": int(r.data.params.get("num_replicas", 0)),
             "global_batch": r.data.params.get("global_batch_size"), "status": r.info.status,
             "rate": r.data.metrics.get("perf/examples_per_sec"),
             "ci95": r.data.metrics.get("perf/examples_per_sec_ci95"),
             "mfu": r.data.metrics.get("perf/mfu"), "peak": r.data.metrics.get("perf/peak_flops"),
             "split": [r.data.metrics.get(k) for k in SPLIT],
             "peak_source": r.data.tags.get("distexp.peak_source")} for r in runs]


def anchor_rows(anchor: Sequence[dict], runs: Sequence[dict]) -> List[dict]:
    """The anchor's table rows: its MFU is the 1-GPU distexp job's of the same precision scaled
    by the two rates (same model, same peak); none without that job."""
    ones = {(r["precision"], r["xla"]): r for r in runs
            if r["gpus"] == 1 and r["status"] == "FINISHED" and r["rate"] and r["what"] == "distexp weak"}
    rows = []
    for a in anchor:
        xla = bool(a.get("jit_compile", False))
        one = ones.get((a["precision"], xla), {})
        mfu = one["mfu"] * a["examples_per_sec"] / one["rate"] if one.get("mfu") else None
        rows.append({"what": ANCHOR, "precision": a["precision"], "xla": xla, "gpus": 1,
                     "global_batch": str(a["batch"]), "status": "FINISHED",
                     "rate": a["examples_per_sec"], "ci95": None, "mfu": mfu,
                     "peak": one.get("peak"), "split": [None] * 4, "peak_source": None})
    return rows


def _split(parts) -> str:
    return "/".join("-" if v is None else f"{v:.1f}" for v in parts) if any(
        v is not None for v in parts) else "-"


def table(runs: Sequence[dict]) -> List[str]:
    """One line per (what, precision, GPUs): examples/s, efficiency over 1 GPU of the same sweep,
    MFU, peak, split; then distexp's 1-GPU rate over the anchor's, per precision."""
    ones: Dict[tuple, float] = {(r["what"], r["precision"], r["xla"]): r["rate"] for r in runs
                                if r["gpus"] == 1 and r["status"] == "FINISHED" and r["rate"]}
    out = [f"{'what':<24} {'precision':<14} {'xla':<3} {'gpus':>4} {'global batch':>12} "
           f"{'examples/s':>18} {'efficiency':>10} {'MFU':>7} {'peak TFLOP/s':>12}  "
           "split in/compute/sync/other ms"]
    order = {"distexp weak": 0, "distexp strong": 1, ANCHOR: 2}
    for r in sorted(runs, key=lambda r: (order.get(r["what"], 3), r["precision"] or "", r["xla"],
                                         r["gpus"])):
        head = (f"{r['what']:<24} {r['precision'] or '?':<14} {'yes' if r['xla'] else 'no':<3} "
                f"{r['gpus']:>4} {r['global_batch'] or '?':>12}")
        if r["status"] != "FINISHED" or not r["rate"]:
            out.append(f"{head} {r['status']:>18}")
            continue
        rate = f"{r['rate']:.1f}" + (f" +/- {r['ci95']:.1f}" if r["ci95"] else "")
        one = ones.get((r["what"], r["precision"], r["xla"]))
        eff = "-" if r["what"] == ANCHOR else f"{r['rate'] / (r['gpus'] * one):.0%}" if one else "n/a"
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a"
        peak = f"{r['peak'] / 1e12:.3g}" if r["peak"] else "n/a"
        out.append(f"{head} {rate:>18} {eff:>10} {mfu:>7} {peak:>12}  {_split(r['split'])}")
    ratios = [f"{p}{' xla' if x else ''} {ones[('distexp weak', p, x)] / ones[(ANCHOR, p, x)]:.2f}x"
              for p in PRECISIONS for x in (False, True)
              if ("distexp weak", p, x) in ones and (ANCHOR, p, x) in ones]
    if ratios:
        out.append(f"distexp (1 GPU) / {ANCHOR}, same model, batch and jit_compile: "
                   f"{', '.join(ratios)}")
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
    p.add_argument("--xla", action="store_true",
                   help="both sides also at jit_compile=true (XLA; Keras fit's own default on one "
                        "GPU without a strategy): twice the jobs, each with XLA's compile time")
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes on the CPU, no test tier: checks the script, measures nothing")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(argv)
    t0 = time.monotonic()
    if args.smoke:
        gpus, sizes = 0, SMOKE
    else:
        line = no_gpu_line()
        if line is not None:
            print(line, flush=True)
            return 0
        from distexp.config.resolved import visible_gpus

        gpus = visible_gpus()
        sizes = Sizes(batch=args.batch, global_batch=args.global_batch, steps=args.steps,
                      warmup=args.warmup)
    if args.xla:
        sizes = sizes._replace(xla=("false", "true"))
    failed, runs = [], []
    if not (args.skip_tests or args.smoke):
        print(f"== GPU test tier: python -m pytest -m gpu ({gpus} GPU(s))", flush=True)
        if subprocess.call([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "gpu",
                            str(ROOT / "tests")], env=child_env()) != 0:
            failed.append("GPU test tier")
    uri = f"sqlite:///{Path.cwd() / 'outputs' / 'mlflow.db'}"
    for mode in ("weak", "strong"):
        if mode == "strong" and strong_repeats_weak(gpus, sizes.batch, sizes.global_batch):
            print("== strong scaling: skipped, its jobs are the weak sweep's (one GPU)", flush=True)
            continue
        sweep = sweep_args(mode, gpus, sizes=sizes)
        print(f"== {mode} scaling: python -m distexp {' '.join(sweep)}", flush=True)
        sweep_id = run_sweep(sweep)
        got = sweep_runs(sweep_id, uri, f"distexp {mode}") if sweep_id else []
        if not got or any(r["status"] != "FINISHED" for r in got):
            failed.append(f"{mode} scaling sweep")
        runs += got
    print(f"== {ANCHOR}: python {' '.join(anchor_args(sizes))}", flush=True)
    anchor = run_anchor(sizes)
    if len(anchor) != len(PRECISIONS) * len(sizes.xla):
        failed.append("the Keras fit anchor")
    print(f"== mirrored ResNet-50, synthetic {'x'.join(map(str, sizes.shape))}, "
          f"{sizes.classes} classes, batch {sizes.batch} per replica, {sizes.steps} steps "
          f"({sizes.warmup} warm-up); {time.monotonic() - t0:.0f} s in all", flush=True)
    print("\n".join(table(runs + anchor_rows(anchor, runs))), flush=True)
    if failed:
        print(f"gpu.sh: failed: {', '.join(failed)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
