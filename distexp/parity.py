"""`python -m distexp.parity [overrides]`: does a strategy train exactly like one device?

Trains k steps of the composed job twice, as one sweep of normal distexp jobs (each in fresh
processes forked from one warm trainer): under `one_device` and under the chosen strategy, at the
same global batch (the chosen strategy's), with the same seed, so the same initial weights and the
same data order. `strategy=a,b,c` checks each of them against one device, with one baseline run
per global batch they need.
Before training, each run computes the gradient norm of the first batch as the optimizer would
apply it (summed over replicas). Then it compares:
- the max per-step loss difference (steps.csv of both runs), against `--tolerance`
  (|a - b| <= tol x max(1, |a|); float32 reductions in another order differ by ~1e-7 here);
- the ratio of the first gradient norms (strategy / one_device), which names the known failure
  shapes: ~N (N replicas: each replica's loss is a mean over its own batch and the replicas'
  gradients are summed: per-replica reduce_mean, then strategy.reduce(SUM)), ~1/N (divided by
  the replicas twice), ~1 with different losses (a mean of replica means, wrong when replicas
  hold different weights, e.g. padding tokens).
Exit 0 within tolerance, 1 beyond, 2 for bad input or a run that failed (no comparison made).
No MLflow (tracking is off for both runs).
This process does not import TensorFlow.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from distexp import console_lines, errors
from distexp import env as distexp_env
from distexp.config import checks, schema
from distexp.strategies import baseline

BASELINE = baseline().name  # the reference strategy
FIXED = ["epochs=1", "warmup_steps=0", "steps_per_execution=1", "tracking.enabled=false", "checkpoint.every_steps=0",
         "measure_peak_flops=false", "measure_step_split=false", "resume=false",
         # the runs are a sweep (one warm trainer): one run per strategy, in its own directory
         "repeats=1", "sweep.controls=false", "hydra.sweeper.params=null"]
OWN_KEYS = ("strategy", "global_batch_size", "batch_size_per_replica", "epochs",
            "steps_per_execution",
            "steps_per_epoch", "hydra.run.dir", "tracking.enabled", "resume", "repeats",
            "sweep.controls", "hparams_search", "hydra.sweep.dir", "hydra.sweep.subdir",
            "hydra.sweeper.params")


def compose(overrides: List[str]):
    from hydra import compose as hcompose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    schema.register()
    conf = Path(__file__).resolve().parent / "conf"
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(conf)):
            return hcompose(config_name="config", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def losses(job: Path) -> List[float]:
    with open(job / "steps.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


def diagnose(diff: float, tol_ok: bool, ratio: Optional[float], n: int) -> str:
    """The failure shape the figures point at (empty when they agree)."""
    if tol_ok:
        return ""
    def near(a, b):
        return b and abs(a - b) / b < 0.05

    if ratio is not None and n > 1 and near(ratio, n):
        return (f"the loss is scaled by N={n} (the number of replicas): each replica's loss is a "
                "mean over its own batch and the replicas' gradients are summed (a per-replica "
                "reduce_mean, then strategy.reduce(SUM)); return (sum, weight) from Task.loss, or "
                "divide the per-example sum by the global batch (tf.nn.compute_average_loss)")
    if ratio is not None and n > 1 and near(ratio, 1 / n):
        return (f"the loss is scaled by 1/N (N={n}): divided by the number of replicas twice "
                "(e.g. a global-batch average that is also averaged over replicas)")
    if ratio is not None and near(ratio, 1.0):
        return ("a mean of replica means: the first gradient has the same norm but the losses "
                "drift; it is exact only when every replica holds the same weight (e.g. padding "
                "tokens): divide each replica's sum by the all-reduced weight (Task.loss -> "
                "(sum, weight))")
    return "the losses differ beyond the tolerance (no known shape: see both runs' steps.csv)"


def run_jobs(names: List[str], overrides: List[str], out: Path) -> Tuple[Dict[str, Path],
                                                                         Dict[str, str]]:
    """Train `strategy=<name>` + `overrides` for every name as one sweep in `out` (`python -m
    distexp -m`): its jobs are forked from one warm trainer, so TensorFlow is imported once, not
    once per job (~3 s each here). Returns each job's directory (out/<name>) and, for each run
    that failed, the line that says why (the sweep's own error line when it stopped before
    any)."""
    from distexp.sweeps.records import records

    for name in names:  # the overrides cut between words: lines of 120 columns at most
        print(textwrap.fill(f"parity: {name}: strategy={name} {' '.join(overrides)}",
                            width=console_lines.WIDTH, subsequent_indent="    ",
                            break_long_words=False, break_on_hyphens=False), flush=True)
    cmd = [sys.executable, "-m", "distexp", "-m", f"strategy={','.join(names)}", *overrides,
           f"hydra.sweep.dir={out}", "hydra.sweep.subdir=${strategy.name}"]
    env = {**os.environ, distexp_env.PARITY: "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    jobs = {name: out / name for name in names}
    if proc.returncode == 0:
        return jobs, {}
    done = {_strategy_of(r): r for r in records(out)}
    line = next((ln for ln in proc.stderr.splitlines() if console_lines.kind_of(ln) == "error"),
                proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "")
    sweep_line = f"{console_lines.text_of(line)} (exit {proc.returncode}, logs: {out})"
    failed = {}
    for name in names:
        rec = done.get(name)
        if rec is None:
            failed[name] = sweep_line
        elif rec["status"] != "COMPLETED":
            failed[name] = f"{rec['error']} (log: {jobs[name]})"
    return jobs, failed


def _strategy_of(record: dict) -> str:
    return next((o.split("=", 1)[1] for o in record["overrides"] if o.startswith("strategy=")), "")


def _parser() -> argparse.ArgumentParser:
    """The command line: --steps, --tolerance, --out and the job's overrides."""
    p = argparse.ArgumentParser(prog="python -m distexp.parity", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="training steps compared (default 20)")
    p.add_argument("--tolerance", type=float, default=1e-5,
                   help="max per-step loss difference, relative to max(1, |loss|) (1e-5)")
    p.add_argument("--out", type=Path, default=None, help="where both runs go "
                   "(default outputs/parity/<time>)")
    p.add_argument("overrides", nargs="*", help="the job, as for python -m distexp")
    return p


def strategies(overrides: List[str]) -> List[str]:
    """The strategies asked for: `strategy=a,b` gives [a, b]; none given: [] (the config's)."""
    names = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "strategy"]
    return [n.strip() for n in names[-1].split(",")] if names else []


def _plan(a: argparse.Namespace, overrides: List[str]):
    """Compose and check the job; (strategy name, sync replicas, global batch), or UserError."""
    cfg = compose(overrides)
    found = checks.validate(cfg)
    if a.steps < 1:
        raise errors.UserError(f"--steps: received {a.steps}; expected >= 1")
    name = cfg.strategy.name
    rec, reference = found.rec, BASELINE
    if rec.baseline:
        raise errors.UserError(f"strategy: received {name!r}; parity compares a strategy with "
                          f"{reference}: choose another strategy")
    if not rec.synchronous and cfg.workers > 1:
        raise errors.UserError(f"workers: received {cfg.workers} with strategy={name}; its steps "
                          "update asynchronously, so per-step losses of several workers are "
                          "not comparable with one device: use workers=1")
    return name, found.layout["sync_replicas"], found.layout["global_batch"]


def _parity_info(job: Path) -> dict:
    """The run's parity.json (replicas, first gradient norm), {} when it wrote none."""
    return json.loads((job / "parity.json").read_text()) if (job / "parity.json").exists() else {}


def _compare(a: argparse.Namespace, name: str, replicas: int, batch: int, one: Path,
             other: Path) -> int:
    """Print both runs' loss difference, gradient-norm ratio and verdict; 0 OK, 1 FAILED."""
    a1, a2 = losses(one), losses(other)
    info1, info2 = _parity_info(one), _parity_info(other)
    n = int(info2.get("replicas", replicas))
    diffs = [abs(x - y) for x, y in zip(a1, a2)]
    diff = max(diffs) if diffs else float("nan")
    ok = len(a1) == len(a2) == a.steps and all(
        d <= a.tolerance * max(1.0, abs(x)) for d, x in zip(diffs, a1))
    g1, g2 = info1.get("grad_norm"), info2.get("grad_norm")
    ratio = g2 / g1 if g1 and g2 is not None else None
    print(f"parity: {name} ({n} replicas) vs one_device, global batch {batch}, {len(diffs)} steps")
    print(f"  max per-step loss difference: {diff:.3g} (tolerance {a.tolerance:g} x max(1, |loss|))")
    print(f"  first-step loss: one_device {a1[0]:.6g}, {name} {a2[0]:.6g}" if a1 and a2 else "")
    if ratio is not None:
        print(f"  first-step gradient norm ratio ({name} / one_device): {ratio:.6g}")
    shape = diagnose(diff, ok, ratio, n)
    print(f"  runs:\n    {one}\n    {other}")  # paths on lines of their own
    if ok:
        print(f"parity: OK: {name} reproduces one_device within {a.tolerance:g}")
        return errors.OK
    print(f"parity: FAILED: {shape}")
    return errors.FAILED


def _plans(a: argparse.Namespace):
    """One (name, replicas, global batch) per strategy asked for, in order; UserError."""
    names = strategies(a.overrides)
    if len(names) != len(set(names)):
        raise errors.UserError(f"strategy: received {','.join(names)}; each strategy once")
    rest = [o for o in a.overrides if o.split("=", 1)[0] != "strategy"]
    return [_plan(a, [*rest, f"strategy={n}"] if names else rest) for n in (names or [None])]


def main(argv: Optional[List[str]] = None) -> int:
    a = _parser().parse_args(argv)
    try:
        plans = _plans(a)
    except errors.UserError as ex:
        print(f"distexp.parity: error: {ex}", file=sys.stderr)
        return errors.BAD_INPUT
    except Exception as ex:  # Hydra: unknown option, bad override
        from distexp.errors import one_line

        msg = one_line(ex)
        if msg is None:
            raise
        print(f"distexp.parity: error: {msg}", file=sys.stderr)
        return errors.BAD_INPUT
    user = [o for o in a.overrides if o.split("=")[0].lstrip("+~") not in OWN_KEYS]
    out = a.out or Path("outputs") / "parity" / time.strftime("%Y-%m-%d_%H-%M-%S")
    batches = sorted({batch for _, _, batch in plans})
    common = {b: [*user, *FIXED, f"global_batch_size={b}", f"steps_per_epoch={a.steps}"]
              for b in batches}
    # one sweep per global batch: its baseline and the strategies that need that batch, in
    # one_device/, mirrored/ ... (under gb<B>/ when the batches differ). A run that failed does
    # not hide the verdicts of those that did not: they are printed, then the failures, exit 2.
    jobs, failed = {}, {}
    for b in batches:
        names = [BASELINE] + [n for n, _, batch in plans if batch == b]
        jobs[b], failed[b] = run_jobs(names, common[b], out if len(batches) == 1 else out / f"gb{b}")
    verdicts, errors_seen = [], []
    for name, replicas, batch in plans:
        broken = [n for n in (BASELINE, name) if n in failed[batch]]
        if broken:
            errors_seen += [f"distexp.parity: error: the {n} run failed: {failed[batch][n]}"
                            for n in broken]
            verdicts.append((name, None))
            continue
        verdicts.append((name, _compare(a, name, replicas, batch, jobs[batch][BASELINE],
                                        jobs[batch][name])))
    if len(verdicts) > 1:
        print("parity: " + ", ".join(f"{n} {'not run' if v is None else 'FAILED' if v else 'OK'}"
                                     for n, v in verdicts))
    for line in dict.fromkeys(errors_seen):  # a baseline that failed is said once
        print(line, file=sys.stderr)
    return errors.BAD_INPUT if errors_seen else max(v for _, v in verdicts)


if __name__ == "__main__":
    sys.exit(main())
