"""What each tuning knob does to examples/s on this machine (distexp only; see
docs/configuration.md, "Performance knobs").

    python benchmarks/knobs.py             # ~4 min on 2 cores
    python benchmarks/knobs.py --rounds 1 --steps 100

Every variant is one distexp job (tracking off) on the same model, data and steps as
benchmarks/overhead.py, one_device unless the variant says otherwise; variants run round-robin
for --rounds rounds, so other load on the machine spreads over all of them. Prints a Markdown
table: median examples/s (min - max) and the median relative to the baseline of the same loop.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import fmt, run_distexp

VARIANTS = [  # (label, strategy, loop, replicas, overrides)
    ("custom: baseline", "one_device", "custom", 1, []),
    ("custom: steps_per_execution=10", "one_device", "custom", 1, ["steps_per_execution=10"]),
    ("custom: jit_compile=true", "one_device", "custom", 1, ["jit_compile=true"]),
    ("custom: precision=mixed_bfloat16", "one_device", "custom", 1, ["precision=mixed_bfloat16"]),
    ("custom: precision=mixed_float16", "one_device", "custom", 1, ["precision=mixed_float16"]),
    ("custom: dataset.prefetch=0", "one_device", "custom", 1, ["dataset.prefetch=0"]),
    ("custom: dataset.threadpool=1", "one_device", "custom", 1, ["dataset.threadpool=1"]),
    ("custom: dataset.on_device=true", "one_device", "custom", 1, ["dataset.on_device=true"]),
    ("fit: baseline", "one_device", "fit", 1, []),
    ("fit: steps_per_execution=10", "one_device", "fit", 1, ["steps_per_execution=10"]),
    ("fit: jit_compile=true", "one_device", "fit", 1, ["jit_compile=true"]),
    ("mirrored x2 custom: baseline", "mirrored", "custom", 2, []),
    ("mirrored x2 custom: cross_device_ops=reduction_to_one_device", "mirrored", "custom", 2,
     ["strategy.cross_device_ops=reduction_to_one_device"]),
    ("mirrored x2 custom: steps_per_execution=10", "mirrored", "custom", 2,
     ["steps_per_execution=10"]),
]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="distexp-knobs-"))
    rates = {v[0]: [] for v in VARIANTS}
    mfu = {v[0]: [] for v in VARIANTS}
    started = time.time()
    for rnd in range(a.rounds):
        for label, strategy, loop, replicas, extra in VARIANTS:
            r = run_distexp(strategy, loop, replicas, a.steps, a.warmup, work, tracking=False,
                            extra=extra)
            rates[label].append(r["examples_per_sec"])
            mfu[label].append(r["result"].get("perf/mfu") or 0.0)
            print(f"round {rnd + 1} {label}: {r['examples_per_sec']:.0f} ex/s", file=sys.stderr,
                  flush=True)
    out = [f"Rounds: {a.rounds}; {a.warmup} warm-up + {a.steps} timed steps per run.", "",
           "| variant | examples/s | vs baseline | MFU |", "|---|---|---|---|"]
    for label, *_ in VARIANTS:
        base = label.split(":")[0] + ": baseline"
        rel = statistics.median(rates[label]) / statistics.median(rates[base])
        out.append(f"| {label} | {fmt(rates[label], '{:.0f}')} | {rel:.2f}x | "
                   f"{100 * statistics.median(mfu[label]):.1f} % |")
    out.append(f"\nWhole run: {(time.time() - started) / 60:.1f} min")
    print("\n".join(out))


if __name__ == "__main__":
    main()
