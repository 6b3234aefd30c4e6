"""The one device run (`bash benchmarks/gpu.sh`, or `python benchmarks/gpu.py`): what distexp's
defaults are worth on a GPU against what a user writes by hand, in one table.

On a machine with NVIDIA GPUs, run from the directory the results should go to (its `outputs/`).
In this order, each part started only while the time budget (`--budget`, 360 s) lasts (a part
not started is said in one line and left out of the table):
1. the GPU test tier: `python -m pytest -m gpu tests/` (tests/cluster/test_gpu.py and the other
   `gpu` tests: logical GPUs' parity and sync, XLA's line);
2. distexp's default (`jit_compile=auto`: XLA on GPU replicas), mirrored ResNet-50
   (keras.applications, weights=None) on synthetic 224x224x3 images of 1000 classes, at
   float32, mixed_float16 and mixed_bfloat16, batch 64 and 256 per replica, `gpus=1..N`;
3. the anchor, a hand-written Keras fit on one GPU at Keras's default (`jit_compile="auto"`: XLA
   on one GPU without a strategy), same model, data, precisions and batches
   (benchmarks/keras_anchor.py);
4. distexp at `jit_compile=false` (batch 64), and the anchor at false: like for like;
5. the XLA step's shape: `jit_compile=true xla_step=whole` (the whole replica step in XLA) at
   batch 256, beside the default's split rows;
6. several GPUs on one: `gpu_replicas=2` (two logical GPUs on GPU 0), batch 64 per replica;
7. with several GPUs, the strong-scaling sweep (global batch 64 x N over the counts dividing it).
Then one table read back from MLflow: per job examples/s (+/- its 95 % interval), the
efficiency (over replicas x the 1-replica job of the same group, precision and batch), MFU and
its peak (docs/gpus.md), the step-time split (input/compute/sync/other ms); the anchor's rows
(its MFU: the 1-GPU distexp job's of the same precision, batch and XLA, scaled by the rates);
the ratios (distexp default / Keras fit default; both at jit_compile=false; whole / split;
2 logical GPUs / 1); TensorFlow's build (CUDA, cuDNN).

`--smoke`: tiny sizes on the CPU (no GPU, no test tier, float32, batch 4): every part that runs
on a CPU, to check the script itself (tests/benchmarks/test_gpu_script_slow.py); the GPU-only
parts (whole step under mirrored, logical GPUs) say so and are left out.

Exit status: 0 when every part that ran passed, else 1. Without an NVIDIA GPU (none under
/proc/driver/nvidia/gpus, or CUDA_VISIBLE_DEVICES hides them) and without --smoke: one line,
exit 0. No TensorFlow in this process: the jobs and the anchor import it.
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
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
SWEEP_LINE = re.compile(r"^Sweep (\S+)(?: \(resumed\))?: MLflow parent run")
ANCHOR = "Keras fit"
DEFAULT = "distexp default"
NO_XLA = "distexp jit=false"
WHOLE = "distexp xla_step=whole"
LOGICAL = "distexp gpu_replicas=2"
STRONG = "distexp strong"
# seconds after which no part starts, so that the run ends within ~8 minutes on one H200 (a part
# started just before takes up to ~2 min: docs/gpus.md, a ResNet-50 job ~35 s before XLA)
BUDGET = 360.0
SPLIT = ("perf/step_input_ms", "perf/step_compute_ms", "perf/step_sync_ms", "perf/step_other_ms")


class Sizes(NamedTuple):
    """The benchmark's model input, batches and run length (--smoke: tiny, on the CPU)."""
    shape: Tuple[int, int, int] = (224, 224, 3)
    classes: int = 1000
    batches: Tuple[int, ...] = (64, 256)  # per replica; the first is the like-for-like rows'
    steps: int = 40
    warmup: int = 10
    precisions: Tuple[str, ...] = PRECISIONS
    global_batch: Optional[int] = None  # the strong sweep's (default: first batch x GPUs)


SMOKE = Sizes(shape=(32, 32, 3), classes=10, batches=(4,), steps=2, warmup=1,
              precisions=("float32",))


class Part(NamedTuple):
    """One sweep of the run: its table label, its overrides beyond the common ones, and whether
    it needs GPU replicas (left out of --smoke)."""
    label: str
    overrides: Tuple[str, ...]
    gpu_only: bool = False


def child_env() -> dict:
    """The environment of the tests and sweeps: this checkout's distexp first."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path)


def gpu_counts(gpus: int, global_batch: Optional[int] = None) -> List[int]:
    """1..gpus; with a fixed global batch, only the counts that divide it; [0] on the CPU."""
    if gpus == 0:
        return [0]
    return [n for n in range(1, gpus + 1) if global_batch is None or global_batch % n == 0]


def parts(gpus: int, z: Sizes) -> List[Part]:
    """The sweeps, in the order they run (the budget may stop the later ones)."""
    one = "gpus=1" if gpus else "gpus=0"
    first, last = z.batches[0], z.batches[-1]
    half = [p for p in z.precisions if p != "mixed_bfloat16"] or list(z.precisions)
    out = [Part(DEFAULT, (f"gpus={','.join(map(str, gpu_counts(gpus)))}",
                          f"precision={','.join(z.precisions)}",
                          f"batch_size_per_replica={','.join(map(str, z.batches))}")),
           Part(NO_XLA, (one, f"precision={','.join(z.precisions)}",
                         f"batch_size_per_replica={first}", "jit_compile=false")),
           Part(WHOLE, (one, f"precision={','.join(half)}", f"batch_size_per_replica={last}",
                        "jit_compile=true", "xla_step=whole"), gpu_only=True),
           Part(LOGICAL, (one, "gpu_replicas=2", f"precision={z.precisions[0]}",
                          f"batch_size_per_replica={first}"), gpu_only=True)]
    strong = z.global_batch or first * max(gpus, 1)
    counts = gpu_counts(gpus, strong)
    if gpus > 1 and len(counts) > 1:
        out.append(Part(STRONG, (f"gpus={','.join(map(str, counts))}",
                                 f"precision={z.precisions[0]}", f"global_batch_size={strong}")))
    return out


def sweep_args(part: Part, z: Sizes, gpus: int) -> List[str]:
    """The `python -m distexp` arguments of one part's sweep."""
    largest = max(z.batches) * max(gpus, 1) * 2  # gpu_replicas=2 on one GPU at most doubles it
    return ["-m", "strategy=mirrored", "model=resnet50", "dataset=synthetic",
            f"dataset.shape=[{','.join(map(str, z.shape))}]", f"dataset.num_classes={z.classes}",
            f"dataset.size={2 * largest}",  # two global batches in memory, repeated
            *part.overrides, "epochs=1", f"steps_per_epoch={z.steps}",
            f"warmup_steps={z.warmup}", f"tracking.experiment={EXPERIMENT}"]


def anchor_args(z: Sizes, jit: str) -> List[str]:
    """benchmarks/keras_anchor.py's arguments: the same model, data and steps on one device;
    jit "auto" at every batch, "false" at the first (the like-for-like rows)."""
    batches = z.batches if jit == "auto" else z.batches[:1]
    return [str(ROOT / "benchmarks" / "keras_anchor.py"), f"--precisions={','.join(z.precisions)}",
            f"--batches={','.join(map(str, batches))}", f"--shape={','.join(map(str, z.shape))}",
            f"--classes={z.classes}", f"--size={2 * max(z.batches)}", f"--steps={z.steps}",
            f"--warmup={z.warmup}", f"--jit-compile={jit}"]


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


def run_anchor(args: Sequence[str]) -> Tuple[List[dict], Optional[dict]]:
    """The hand-written Keras fit: its JSON rows and its build line (the rest streamed through);
    no rows when it failed."""
    out, build = [], None
    p = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, bufsize=1, env=child_env())
    for line in p.stdout:
        if line.startswith("{"):
            row = json.loads(line)
            if "build" in row:
                build = row["build"]
            else:
                out.append(row)
        else:
            sys.stdout.write(line)
    p.wait()
    return (out if p.returncode == 0 else []), build


def sweep_runs(sweep_id: str, uri: str, what: str) -> List[dict]:
    """The sweep's job runs: precision, XLA as resolved, replicas, batch, status, perf figures."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], f"tags.`distexp.sweep_id` = '{sweep_id}' "
                              "and tags.`distexp.run_kind` = 'job'", max_results=1000)
    out = []
    for r in runs:
        p, m = r.data.params, r.data.metrics
        replicas = int(p.get("num_replicas", 0))
        batch = int(p.get("global_batch_size", 0)) // max(replicas, 1)
        out.append({"what": what, "precision": p.get("precision"),
                    "xla": str(p.get("jit_compile_resolved")).lower() == "true",
                    "gpus": replicas, "batch": batch, "status": r.info.status,
                    "rate": m.get("perf/examples_per_sec"),
                    "ci95": m.get("perf/examples_per_sec_ci95"), "mfu": m.get("perf/mfu"),
                    "peak": m.get("perf/peak_flops"), "split": [m.get(k) for k in SPLIT],
                    "peak_source": r.data.tags.get("distexp.peak_source")})
    return out


def anchor_rows(anchor: Sequence[dict], runs: Sequence[dict]) -> List[dict]:
    """The anchor's table rows (what: `Keras fit <jit_compile>`): its MFU is the 1-GPU distexp
    job's of the same precision, batch and XLA scaled by the two rates (same model, same
    peak); none without that job."""
    ones = {(r["precision"], r["batch"], r["xla"]): r for r in runs
            if r["gpus"] == 1 and r["status"] == "FINISHED" and r["rate"]
            and r["what"] in (DEFAULT, NO_XLA)}
    rows = []
    for a in anchor:
        xla = bool(a.get("xla", False))
        one = ones.get((a["precision"], int(a["batch"]), xla), {})
        mfu = one["mfu"] * a["examples_per_sec"] / one["rate"] if one.get("mfu") else None
        rows.append({"what": f"{ANCHOR} {a['jit_compile']}", "precision": a["precision"],
                     "xla": xla, "gpus": 1, "batch": int(a["batch"]), "status": "FINISHED",
                     "rate": a["examples_per_sec"], "ci95": None, "mfu": mfu,
                     "peak": one.get("peak"), "split": [None] * 4, "peak_source": None})
    return rows


def _split(parts) -> str:
    return "/".join("-" if v is None else f"{v:.1f}" for v in parts) if any(
        v is not None for v in parts) else "-"


ORDER = (DEFAULT, f"{ANCHOR} auto", NO_XLA, f"{ANCHOR} false", WHOLE, LOGICAL, STRONG)


def _rates(runs: Sequence[dict]) -> Dict[tuple, float]:
    """(what, precision, batch) -> examples/s of its 1-replica job (a finished one)."""
    return {(r["what"], r["precision"], r["batch"]): r["rate"] for r in runs
            if r["gpus"] == 1 and r["status"] == "FINISHED" and r["rate"]}


def table(runs: Sequence[dict]) -> List[str]:
    """One line per job: examples/s, efficiency over the 1-replica job of the same group,
    precision and batch (gpu_replicas: the default group's), MFU, peak, split; then ratios."""
    ones = _rates(runs)
    out = [f"{'what':<24} {'precision':<14} {'xla':<3} {'replicas':>8} {'batch':>5} "
           f"{'examples/s':>18} {'efficiency':>10} {'MFU':>7} {'peak TFLOP/s':>12}  "
           "split in/compute/sync/other ms"]
    order = {w: i for i, w in enumerate(ORDER)}
    for r in sorted(runs, key=lambda r: (order.get(r["what"], 9), r["precision"] or "",
                                         r["batch"], r["xla"], r["gpus"])):
        head = (f"{r['what']:<24} {r['precision'] or '?':<14} {'yes' if r['xla'] else 'no':<3} "
                f"{r['gpus']:>8} {r['batch']:>5}")
        if r["status"] != "FINISHED" or not r["rate"]:
            out.append(f"{head} {r['status']:>18}")
            continue
        rate = f"{r['rate']:.1f}" + (f" +/- {r['ci95']:.1f}" if r["ci95"] else "")
        base = DEFAULT if r["what"] == LOGICAL else r["what"]
        one = ones.get((base, r["precision"], r["batch"]))
        eff = "-" if r["what"].startswith(ANCHOR) else \
            f"{r['rate'] / (r['gpus'] * one):.0%}" if one else "n/a"
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a"
        peak = f"{r['peak'] / 1e12:.3g}" if r["peak"] else "n/a"
        out.append(f"{head} {rate:>18} {eff:>10} {mfu:>7} {peak:>12}  {_split(r['split'])}")
    out += ratios(runs)
    sources = sorted({r["peak_source"] for r in runs if r["peak_source"]})
    out += [f"peak: {s}" for s in sources] or ["peak: none known for these GPUs: no MFU"]
    return out


def ratios(runs: Sequence[dict]) -> List[str]:
    """The questions the run answers, each a ratio of 1-replica rates, same precision and batch."""
    ones = _rates(runs)
    out = []
    for label, top, bottom in (
            ("distexp default / Keras fit default (auto)", DEFAULT, f"{ANCHOR} auto"),
            ("distexp / Keras fit, both jit_compile=false", NO_XLA, f"{ANCHOR} false"),
            ("xla_step whole / split (distexp default)", WHOLE, DEFAULT)):
        got = [f"{p} b{b} {rate / ones[(bottom, p, b)]:.2f}x" for (w, p, b), rate in
               sorted(ones.items(), key=lambda kv: (kv[0][1], kv[0][2]))
               if w == top and (bottom, p, b) in ones]
        if got:
            out.append(f"{label}: {', '.join(got)}")
    return out


def build_line(build: Optional[dict]) -> str:
    if not build:
        return "build: unknown (the anchor did not run)"
    rest = ", ".join(f"{k} {v}" for k, v in build.items() if k != "tensorflow")
    return f"build: TensorFlow {build.get('tensorflow')} ({rest})"


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bash benchmarks/gpu.sh", description=__doc__.split("\n")[0])
    p.add_argument("--batches", default="64,256", help="batches per replica, comma-separated")
    p.add_argument("--global-batch", type=int, default=None,
                   help="the strong sweep's global batch (several GPUs; default: the first "
                        "batch x GPUs)")
    p.add_argument("--steps", type=int, default=40, help="training steps per job")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps (not timed)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds: no part starts after them (the run's whole time, tests "
                        f"included; default {BUDGET:.0f}, none with --smoke)")
    p.add_argument("--skip-tests", action="store_true", help="only the benchmark")
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes on the CPU, no test tier: checks the script, measures nothing")
    return p.parse_args(argv)


class Run:
    """The parts as they run: each starts only while the budget lasts; what failed."""

    def __init__(self, budget: float, gpus: int, sizes: Sizes, smoke: bool):
        self.t0, self.budget, self.gpus, self.sizes = time.monotonic(), budget, gpus, sizes
        self.smoke, self.failed, self.runs, self.anchor, self.build = smoke, [], [], [], None
        self.uri = f"sqlite:///{Path.cwd() / 'outputs' / 'mlflow.db'}"

    def may_start(self, what: str) -> bool:
        spent = time.monotonic() - self.t0
        if spent > self.budget:
            print(f"== {what}: not run: the budget of {self.budget:.0f} s is spent ({spent:.0f} s)",
                  flush=True)
        return spent <= self.budget

    def tests(self) -> None:
        if self.may_start("GPU test tier"):
            print(f"== GPU test tier: python -m pytest -m gpu ({self.gpus} GPU(s))", flush=True)
            if subprocess.call([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m",
                                "gpu", str(ROOT / "tests")], env=child_env()) != 0:
                self.failed.append("GPU test tier")

    def sweep(self, part: Part) -> None:
        if part.gpu_only and self.smoke:
            print(f"== {part.label}: not run in --smoke (GPU replicas only)", flush=True)
            return
        if not self.may_start(part.label):
            return
        args = sweep_args(part, self.sizes, self.gpus)
        print(f"== {part.label}: python -m distexp {' '.join(args)}", flush=True)
        sweep_id = run_sweep(args)
        got = sweep_runs(sweep_id, self.uri, part.label) if sweep_id else []
        if not got or any(r["status"] != "FINISHED" for r in got):
            self.failed.append(part.label)
        self.runs += got

    def keras(self, jit: str) -> None:
        if not self.may_start(f"{ANCHOR} {jit}"):
            return
        args = anchor_args(self.sizes, jit)
        print(f"== {ANCHOR} {jit}: python {' '.join(args)}", flush=True)
        rows, build = run_anchor(args)
        batches = len(self.sizes.batches) if jit == "auto" else 1
        if len(rows) != len(self.sizes.precisions) * batches:
            self.failed.append(f"{ANCHOR} {jit}")
        self.anchor += rows
        self.build = self.build or build


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(argv)
    if args.smoke:
        gpus, sizes = 0, SMOKE
    else:
        line = no_gpu_line()
        if line is not None:
            print(line, flush=True)
            return 0
        from distexp.config.resolved import visible_gpus

        gpus = visible_gpus()
        sizes = Sizes(batches=tuple(int(b) for b in args.batches.split(",")),
                      global_batch=args.global_batch, steps=args.steps, warmup=args.warmup)
    budget = args.budget if args.budget is not None else float("inf") if args.smoke else BUDGET
    run = Run(budget, gpus, sizes, args.smoke)
    if not (args.skip_tests or args.smoke):
        run.tests()
    default, no_xla, *rest = parts(gpus, sizes)
    run.sweep(default)
    run.keras("auto")
    run.sweep(no_xla)
    run.keras("false")
    for part in rest:
        run.sweep(part)
    print(f"== mirrored ResNet-50, synthetic {'x'.join(map(str, sizes.shape))}, "
          f"{sizes.classes} classes, {sizes.steps} steps a job ({sizes.warmup} warm-up); "
          f"{time.monotonic() - run.t0:.0f} s in all", flush=True)
    print("\n".join([*table(run.runs + anchor_rows(run.anchor, run.runs)),
                     build_line(run.build)]), flush=True)
    if run.failed:
        print(f"gpu.sh: failed: {', '.join(run.failed)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
