"""`steps_per_execution=auto`: how many steps one call runs, measured at the start of the run
(pure Python: no TensorFlow; the custom loop feeds it the wall time of each call).

The per-step time at k steps per call is about s + c / k (s: the step's own work, c: the cost of
one call: Python, dispatch, fetching the losses). Doubling k saves c / 2k per step, which matters
while c is large against s and stops mattering soon after. The tuner measures that saving
instead of assuming it:

- Warm-up (the run's `warmup_steps`): one 1-step call, then 2-step calls, so both compiled
  functions (one step; k steps in a `tf.range` loop) are traced before anything is measured.
  Calls never cross the warm-up's end (so no timed call contains a warm-up step).
- Tuning: starting at k = 1, calls of k and 2k steps alternate (so a slow period of the machine
  hits both); the first call at each size is not used. Once each side has at least `samples`
  calls and `min_seconds` of steps (at most `max_samples`), their mean per-step times are
  compared with a Welch interval (Student t, 95 %, two-sided): k doubles only if 2k is faster by
  more than the interval. Otherwise, or when 2k would reach the cap, or when a 2k call would be
  predicted to take more than `budget_s` (TF PR 41742: ~0.2-1 s per execution), k is final.
- Noisy-but-equal timings therefore keep k (a false grow needs a 2.5 % tail event), a clear
  per-call overhead grows it.

Calls cut short (an epoch's end, a checkpoint) train and are timed as usual but are not samples.
The chosen k is the one the rest of the run uses; every step, tuning included, is timed and
reported by the usual definitions (a call's interval shared by its steps).
"""
from __future__ import annotations

import math
import statistics
from typing import Dict, List, Optional

MAX_K = 128
FIXED_K = 8  # multiworker: every worker must run the same call sizes; no per-worker timing
FIT_MAX_K = 16

# Student t, 97.5 % quantile, df 1..30 (two-sided 95 %).
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df: float) -> float:
    if df < 1:
        return _T975[0]
    if df <= 30:
        lo = int(math.floor(df))
        hi = min(lo + 1, 30)
        return _T975[lo - 1] + (_T975[hi - 1] - _T975[lo - 1]) * (df - lo)
    return 1.96 + 2.4 / df  # within 0.01 of the exact quantile above 30


def welch(a: List[float], b: List[float]):
    """(mean(a) - mean(b), half-width of its 95 % Welch interval)."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.fmean(a) - statistics.fmean(b)
    se2 = va + vb
    if se2 == 0:
        return diff, 0.0
    df = se2 ** 2 / ((va ** 2 / (len(a) - 1) if va else 0) + (vb ** 2 / (len(b) - 1) if vb else 0))
    return diff, t975(df) * math.sqrt(se2)


def cap_for(*limits: Optional[int], max_k: int = MAX_K) -> int:
    """The largest k allowed: the smallest of the positive limits (epoch length, checkpoint
    interval, log_every_steps) and max_k."""
    return max(1, min([max_k] + [int(v) for v in limits if v]))


def fit_k(steps_per_epoch: int, *limits: Optional[int]) -> int:
    """`loop=fit`: Keras takes k once, at compile time, and k must divide the steps per epoch:
    the largest divisor of steps_per_epoch that is <= FIT_MAX_K and the caps."""
    cap = cap_for(*limits, max_k=FIT_MAX_K)
    return max(d for d in range(1, cap + 1) if steps_per_epoch % d == 0)


class Tuner:
    def __init__(self, cap: int, warmup_steps: int, *, budget_s: float = 0.5, samples: int = 5,
                 min_seconds: float = 0.25, max_samples: int = 30, parallel: int = 1):
        self.cap = max(1, int(cap))
        self.warmup = max(0, int(warmup_steps))
        self.budget_s, self.samples = budget_s, samples
        self.min_seconds, self.max_samples = min_seconds, max_samples
        self.parallel = parallel  # ps: steps of that many workers share one measured interval
        self.k = 1
        self.seen = 0                      # steps observed so far
        self.done = self.cap == 1
        self.reason = "cap is 1" if self.done else ""
        self.history: List[str] = []       # one line per decision
        self._turn = 0                     # alternation: 0 -> k, 1 -> 2k
        self._per_step: Dict[int, List[float]] = {}
        self._settled: set = set()

    # -- what the loop asks -------------------------------------------------------------------
    def size(self) -> int:
        """Steps per call for the next call."""
        if self.done:
            return self.k
        if self.seen < self.warmup:
            return 1 if self.seen == 0 else min(2, self.cap)
        return self.k if self._turn == 0 else 2 * self.k

    def warmup_left(self) -> int:
        return max(0, self.warmup - self.seen)

    def observe(self, size: int, steps: int, seconds: float) -> None:
        """A call asked for `size` steps per call ran `steps` steps in `seconds` (wall time from
        before the call to after its results were on the host)."""
        first = self.seen
        self.seen += steps
        if self.done or first < self.warmup:
            return
        expected = self.k if self._turn == 0 else 2 * self.k
        if size != expected or steps != size:
            return  # cut short (epoch end, checkpoint) or not ours: not a sample
        self._turn = 1 - self._turn
        if size not in self._settled:
            self._settled.add(size)
            return
        self._per_step.setdefault(size, []).append(seconds / steps)
        self._decide()

    def stop(self, reason: str) -> None:
        if not self.done:
            self.done, self.reason = True, reason

    # -- the decision ---------------------------------------------------------------------------
    def _enough(self, values: List[float], size: int) -> bool:
        return len(values) >= self.max_samples or (
            len(values) >= self.samples and sum(values) * size >= self.min_seconds)

    def _decide(self) -> None:
        a = self._per_step.get(self.k, [])
        b = self._per_step.get(2 * self.k, [])
        if not (self._enough(a, self.k) and self._enough(b, 2 * self.k)):
            return
        diff, half = welch(a, b)
        ma, mb = statistics.fmean(a), statistics.fmean(b)
        line = (f"k={self.k}: {1e3 * ma:.3f} ms/step (n={len(a)}), k={2 * self.k}: "
                f"{1e3 * mb:.3f} ms/step (n={len(b)}), difference {1e3 * diff:+.3f} "
                f"+/- {1e3 * half:.3f} ms (95 %)")
        self.history.append(line)
        if diff <= half:
            return self.stop(f"k={2 * self.k} not faster beyond the 95 % interval ({line})")
        self.k *= 2
        self._per_step = {}  # the next comparison is measured afresh, alternating again
        self._turn = 0
        if 2 * self.k > self.cap:
            return self.stop(f"{2 * self.k} would exceed the cap {self.cap} ({line})")
        if 2 * self.k * mb * self.parallel > self.budget_s:
            return self.stop(f"a call of {2 * self.k} steps would take over {self.budget_s} s "
                             f"({line})")
