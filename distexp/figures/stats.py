"""Is a speed-up real? Intervals and verdicts from repeated runs (plain Python for a few samples;
Student's t from SciPy).

- `ratio_interval`: the 95 % interval of the ratio of two throughputs measured in repeated runs:
  Welch's t-interval on log(examples/s) (throughput ratios are multiplicative; Welch does not
  assume both configs vary alike, and its t quantile widens the interval honestly for 2-5 runs,
  where a bootstrap's percentiles would be far too narrow). Interval of the ratio of geometric
  means: exp(d +- t(0.975, v) * se), d = mean(log x) - mean(log y),
  se = sqrt(s_x^2/n_x + s_y^2/n_y), v = Welch-Satterthwaite degrees of freedom.
- `repeats_needed`: runs per config for which that interval would exclude 1 with 80 % power,
  given the observed spread: the smallest n >= 2 with
  n >= 2 s^2 (t(0.975, 2n-2) + t(0.80, 2n-2))^2 / d^2, s^2 = (s_x^2 + s_y^2) / 2 (the two-sample
  sample-size formula, t instead of z for small n).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

LEVEL = 0.95
POWER = 0.80
MAX_REPEATS = 1000  # beyond this, "no difference worth resolving"


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _mean_var(xs: Sequence[float]) -> Tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (any real df > 0). scipy.special's stdtrit is what scipy.stats.t.ppf
    calls; imported here, not at the top: scipy.stats' import takes ~1 s, the report starts without."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def t_cdf(t: float, df: float) -> float:
    """Student's t CDF (any real df > 0): scipy.special's stdtr, what scipy.stats.t.cdf calls."""
    from scipy.special import stdtr

    return float(stdtr(df, t))


def first_non_finite(values: Sequence[float]) -> Optional[int]:
    """The index of the first NaN or infinite value of `values`, or None: the one test of a
    diverged training loss (both loops; math.isfinite, as the run's sink drops such a figure)."""
    return next((i for i, v in enumerate(values) if not math.isfinite(v)), None)


def welch(x: Sequence[float], y: Sequence[float],
          level: float = LEVEL) -> Optional[Tuple[float, float, float]]:
    """Welch's t-interval of mean(x) - mean(y): (the difference, the half-width of its `level`
    interval, the Welch-Satterthwaite degrees of freedom), or None with fewer than 2 samples on
    either side. No spread on either side: half-width 0, df infinite. The one Welch of distexp
    (the report's ratios, distexp.train.autotune's steps_per_execution)."""
    if len(x) < 2 or len(y) < 2:
        return None
    (mx, vx), (my, vy) = _mean_var(x), _mean_var(y)
    a, b = vx / len(x), vy / len(y)
    if a + b == 0:
        return mx - my, 0.0, float("inf")
    df = (a + b) ** 2 / (a * a / (len(x) - 1) + b * b / (len(y) - 1))
    return mx - my, t_quantile(0.5 + level / 2, df) * math.sqrt(a + b), df


def ratio_interval(x: Sequence[float], y: Sequence[float],
                   level: float = LEVEL) -> Optional[Tuple[float, float, float]]:
    """(low, high, df) of the `level` interval of x/y (Welch on logs; module docstring), or None
    with fewer than 2 positive samples on either side."""
    if len(x) < 2 or len(y) < 2 or min(x) <= 0 or min(y) <= 0:
        return None
    d, half, df = welch([math.log(v) for v in x], [math.log(v) for v in y], level)
    return math.exp(d - half), math.exp(d + half), df


def repeats_needed(x: Sequence[float], y: Sequence[float], level: float = LEVEL,
                   power: float = POWER) -> Optional[int]:
    """Runs per config that would resolve the observed difference (module docstring); None when
    it cannot be estimated (under 2 runs a side) or exceeds MAX_REPEATS (no visible difference)."""
    if len(x) < 2 or len(y) < 2 or min(x) <= 0 or min(y) <= 0:
        return None
    (mx, vx), (my, vy) = _mean_var([math.log(v) for v in x]), _mean_var([math.log(v) for v in y])
    d2, s2 = (mx - my) ** 2, (vx + vy) / 2
    if s2 == 0:
        return 2 if d2 > 0 else None
    if d2 == 0:
        return None
    def enough(n: int) -> bool:
        df = 2 * n - 2
        return n >= 2 * s2 * (t_quantile(0.5 + level / 2, df) + t_quantile(power, df)) ** 2 / d2

    # `enough` is monotone in n (the left side grows; the quantiles, hence the right side, shrink
    # as df grows, power > 0.5), so the smallest n is found by bisection: ~2 x 10 quantiles
    # instead of up to 2 x 999.
    if not enough(MAX_REPEATS):
        return None
    lo, hi = 2, MAX_REPEATS  # enough(hi) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
