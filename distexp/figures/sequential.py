"""Anytime-valid confidence sequences for a speed ratio measured round by round (`repeats=auto`).

A comparison of set-up A with set-up B pairs their runs by round: d_i = log(rate_A,i / rate_B,i),
i = 1..n (a round runs every open set-up once, interleaved, so a slow period of the machine hits
both runs of a pair). The target is the mean log ratio mu; exp(mu) is the speed ratio.

The boundary (docs/report.md, "repeats=auto"):

- `t_mixture_radius`: the scale-invariant normal mixture for a normal mean with unknown variance
  (Lai 1976, "On confidence sequences", Ann. Statist. 4(2); the mixture is the Bayes factor of the
  one-sample t-test with a N(0, g) prior on the effect size mu/sigma and the right-Haar prior on
  sigma, a test martingale for every sigma: Perez-Ortiz, Lardy, de Heide & Gruenwald, "E-statistics,
  group invariance and anytime-valid testing", Ann. Statist. 2024):
      BF_n(mu) = (1 + n g)^(-1/2) * ((1 + t^2/v) / (1 + t^2/(v (1 + n g))))^((v + 1)/2),
      t = (mean - mu) sqrt(n) / s, v = n - 1, s the sample standard deviation.
  By Ville's inequality P(BF_n(mu) >= 1/alpha for some n) <= alpha, so {mu: BF_n(mu) < 1/alpha}
  is a (1 - alpha) confidence sequence: valid at every n at once, whatever rule stops the rounds.
  It is the t-like version of the normal mixture: BF < 1/alpha solves in closed form for t^2
  (infinite at small n, where two or three differences cannot settle anything at that alpha), and
  as n grows it tends to
- `normal_mixture_radius`: Robbins' normal mixture with the variance known (Howard, Ramdas,
  McAuliffe & Sekhon 2021, Ann. Statist. 49(2), the normal-mixture boundary; with the variance
  estimated it is the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy &
  Ramdas, arXiv 2103.06476, Theorem 2.2):
      mean +- sqrt( 2 (n rho^2 var + 1) / (n^2 rho^2) * log( sqrt(n rho^2 var + 1) / alpha ) ),
  with g = rho^2 var.
- `mixing_g`: g chosen to make the boundary tightest at n = `target` rounds (the same paper's
  rho = sqrt((-2 log alpha + log(-2 log alpha + 1)) / target), var = 1).

`outcome` turns the sequence into one of four outcomes with margin m on the ratio:
*faster* (the ratio's interval above 1), *slower* (below 1), *equal* (inside [1/(1+m), 1+m]),
else *open* (not settled). Pure Python: the sweeper and the report import it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

FASTER, SLOWER, EQUAL, OPEN = "faster", "slower", "equal", "not settled"
SETTLED = (FASTER, SLOWER, EQUAL)


def mixing_g(alpha: float, target: int) -> float:
    """g = rho^2 var that makes the boundary tightest at `target` observations (module docstring)."""
    a = -2 * math.log(alpha)
    return (a + math.log(a + 1)) / max(target, 1)


def normal_mixture_radius(n: int, var: float, alpha: float, rho: float) -> float:
    """The half-width of Robbins' normal-mixture confidence sequence for a mean after n
    observations of variance `var` (module docstring)."""
    x = n * rho * rho * var + 1
    return math.sqrt(2 * x / (n * n * rho * rho) * math.log(math.sqrt(x) / alpha))


def t_mixture_bound(n: int, alpha: float, g: float) -> float:
    """The t^2 at which BF_n reaches 1/alpha (module docstring); inf when no t reaches it."""
    if n < 2:
        return math.inf
    v = n - 1
    big = 1 + n * g
    k = (math.sqrt(big) / alpha) ** (2 / (v + 1))
    if k >= big:  # BF_n is bounded by big^(v/2): 1/alpha out of reach at this n
        return math.inf
    return v * (k - 1) / (1 - k / big)


def t_mixture_factor(n: int, t: float, g: float) -> float:
    """BF_n at t-statistic t (module docstring): the e-value of "mean = mu"."""
    v = n - 1
    big = 1 + n * g
    return big ** -0.5 * ((1 + t * t / v) / (1 + t * t / (v * big))) ** ((v + 1) / 2)


def t_mixture_radius(n: int, sd: float, alpha: float, g: float) -> float:
    """The half-width of the t-mixture confidence sequence after n observations with sample
    standard deviation `sd`: sd / sqrt(n) * sqrt(t^2 bound)."""
    t2 = t_mixture_bound(n, alpha, g)
    if math.isinf(t2):
        return math.inf
    return sd / math.sqrt(n) * math.sqrt(t2)


@dataclass(frozen=True)
class Outcome:
    kind: str               # FASTER | SLOWER | EQUAL | OPEN
    ratio: Optional[float]  # exp(mean log ratio): the geometric-mean speed ratio
    low: float              # the ratio's confidence-sequence bounds (0 / inf when unbounded)
    high: float
    rounds: int

    @property
    def settled(self) -> bool:
        return self.kind in SETTLED

    def text(self, margin: float) -> str:
        """1.18x [1.09, 1.27] faster | 0.97x [0.93, 1.02] equal within +-5% |
        1.03x [0.91, 1.16] not settled after 4 rounds"""
        if self.ratio is None:
            return f"not settled after {self.rounds} rounds (no paired runs)"
        iv = f"{self.ratio:.2f}x [{_num(self.low)}, {_num(self.high)}]"
        if self.kind == EQUAL:
            return f"{iv} equal within +-{100 * margin:g}%"
        if self.kind == OPEN:
            return f"{iv} not settled after {self.rounds} round{'s' * (self.rounds != 1)}"
        return f"{iv} {self.kind}"


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def log_interval(diffs: Sequence[float], alpha: float, g: float):
    """(mean, low, high) of the confidence sequence for the mean of `diffs` (t mixture)."""
    n = len(diffs)
    mean = sum(diffs) / n
    if n < 2:
        return mean, -math.inf, math.inf
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    r = t_mixture_radius(n, sd, alpha, g)
    return mean, mean - r, mean + r


def outcome(a: Sequence[float], b: Sequence[float], alpha: float, margin: float,
            g: float) -> Outcome:
    """The outcome of comparing rates `a` with rates `b` (paired by position: a round each; a
    round where either is missing or not positive is skipped)."""
    diffs = [math.log(x / y) for x, y in zip(a, b)
             if x is not None and y is not None and x > 0 and y > 0]
    if not diffs:
        return Outcome(OPEN, None, 0.0, math.inf, 0)
    mean, lo, hi = log_interval(diffs, alpha, g)
    edge = math.log1p(margin)
    if lo > 0:
        kind = FASTER
    elif hi < 0:
        kind = SLOWER
    elif -edge <= lo and hi <= edge:
        kind = EQUAL
    else:
        kind = OPEN
    return Outcome(kind, math.exp(mean), _exp(lo), _exp(hi), len(diffs))


def _exp(x: float) -> float:
    return 0.0 if x == -math.inf else math.inf if x == math.inf else math.exp(x)
