"""Intervals for a speed ratio measured round by round: `repeats=auto`'s rule and `repeats=N`'s.

The rules (each a `multiplier(n)` c(n): the interval is mean +- c(n) s / sqrt(n)):
- `planned` (repeats=auto): repeated confidence intervals over the planned rounds
  (`sweep.max_repeats`), an error-spending boundary calibrated once per (alpha, horizon); past
  the plan, the t mixture below on the alpha kept for it (RESERVE). docs/sweeps.md.
- `Mixture`: the open-ended t-mixture sequence (the rule before; the extension past the plan).
- `Fixed` (repeats=N): the fixed-sample paired t interval, one look.

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

`difference` is the accuracy half: the same rule on paired differences in points (additive),
more accurate | less accurate | as accurate (within +-m points) | not settled.

`outcome` turns an interval into one of five outcomes with margin m on the ratio:
*faster* (the ratio's interval above 1), *slower* (below 1), *equal* (inside [1/(1+m), 1+m]),
*at the margin* (in the band around the margin's edge, `at_margin`: more rounds would not tell
equal from different at a cost worth paying), else *open* (not settled). Pure Python: the
sweeper and the report import it.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

FASTER, SLOWER, EQUAL, OPEN = "faster", "slower", "equal", "not settled"
AT_MARGIN = "at the margin"
SETTLED = (FASTER, SLOWER, EQUAL, AT_MARGIN)


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


# --- the rules: a multiplier c(n) of s / sqrt(n) for each look n ------------------------------

FIRST_LOOK = 3      # a planned look's interval from 3 rounds on (2 differences: df 1, no use)
RESERVE = 0.2       # the share of alpha kept for rounds past the plan (a continued sweep)
PATHS = 200_000     # Monte Carlo paths that calibrate the planned boundary (seeded)


@dataclass(frozen=True)
class Mixture:
    """The open-ended rule: the t-mixture confidence sequence at `alpha` (module docstring)."""
    alpha: float
    g: float
    method = "t-mixture confidence sequence"

    def multiplier(self, n: int) -> float:
        return math.sqrt(t_mixture_bound(n, self.alpha, self.g))


@dataclass(frozen=True)
class Fixed:
    """`repeats=N`: the fixed-sample paired t interval at level 1 - alpha (one look, at the end)."""
    alpha: float
    method = "fixed-sample paired t"

    def multiplier(self, n: int) -> float:
        if n < 2:
            return math.inf
        from distexp.figures.stats import t_quantile

        return t_quantile(1 - self.alpha / 2, n - 1)


@dataclass(frozen=True)
class Planned:
    """`repeats=auto`: repeated confidence intervals over the planned looks FIRST_LOOK..horizon
    (Jennison & Turnbull 1989), the paired t interval with a per-look level from an error-spending
    boundary (Lan & DeMets 1983) that spends (1 - RESERVE) x alpha by the horizon; past it (a
    continued sweep) the t-mixture sequence at RESERVE x alpha. `planned_multipliers`."""
    alpha: float
    horizon: int
    multipliers: tuple   # c(n) for n = FIRST_LOOK .. horizon
    extension: Mixture
    method = "repeated confidence intervals"

    def multiplier(self, n: int) -> float:
        if n > self.horizon:
            return self.extension.multiplier(n)
        return self.multipliers[n - FIRST_LOOK] if n >= FIRST_LOOK else math.inf


def planned(alpha: float, horizon: int) -> Planned:
    """The `repeats=auto` rule for a comparison at `alpha` with `horizon` planned rounds."""
    ext = Mixture(alpha * RESERVE, mixing_g(alpha * RESERVE, max(horizon, 2)))
    return Planned(alpha, horizon, planned_multipliers(alpha * (1 - RESERVE), horizon), ext)


@functools.lru_cache(maxsize=16)
def planned_multipliers(alpha: float, horizon: int) -> tuple:
    """c(n) = t quantile at 1 - a_n / 2 with n - 1 degrees of freedom, a_n = a x (n - 1): the
    nominal level of a look grows with its degrees of freedom (the early looks, with few, buy
    little), a chosen so that the chance that any look n = FIRST_LOOK..horizon of a normal
    sequence has |t_n| > c(n) is alpha. The t statistics at the true mean are pivotal (their
    joint law is free of the mean and the spread), so that chance is one number for every
    sweep: computed from PATHS seeded sequences, and a is set so that it is alpha less two
    Monte Carlo standard errors. docs/sweeps.md has the multipliers and the simulations."""
    import numpy as np
    from scipy.special import stdtrit

    looks = list(range(FIRST_LOOK, horizon + 1))
    if not looks:
        return ()
    z = np.random.default_rng(20260101).standard_normal((PATHS, horizon))
    total, squares = np.cumsum(z, 1), np.cumsum(z * z, 1)
    t = []
    for n in looks:
        m = total[:, n - 1] / n
        t.append(np.abs(m) / np.sqrt((squares[:, n - 1] - n * m * m) / (n - 1) / n))
    target = alpha - 2 * math.sqrt(alpha * (1 - alpha) / PATHS)

    def cs(a):
        return [float(stdtrit(n - 1, 1 - min(a * (n - 1), 1.0) / 2)) for n in looks]

    def crossed(a):
        hit = np.zeros(PATHS, bool)
        for tn, c in zip(t, cs(a)):
            hit |= tn > c
        return hit.mean()

    lo, hi = target / (horizon * horizon * 4), target  # crossed(lo) <= target < crossed(hi)
    for _ in range(30):  # bisection on the log scale: a to ~1 %
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if crossed(mid) <= target else (lo, mid)
    return tuple(cs(lo))


# --- an outcome ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    kind: str               # FASTER | SLOWER | EQUAL | OPEN
    ratio: Optional[float]  # exp(mean log ratio): the geometric-mean speed ratio
    low: float              # the ratio's interval (0 / inf when unbounded)
    high: float
    rounds: int
    spread: Optional[float] = None  # the sample sd of the paired log ratios (None under 2)

    @property
    def settled(self) -> bool:
        return self.kind in SETTLED


def log_interval(diffs: Sequence[float], rule) -> Tuple[float, float, float, Optional[float]]:
    """(mean, low, high, sd) of the mean of `diffs` under `rule` (its multiplier of sd/sqrt(n))."""
    n = len(diffs)
    mean = sum(diffs) / n
    if n < 2:
        return mean, -math.inf, math.inf, None
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    c = rule.multiplier(n)
    if math.isinf(c):
        return mean, -math.inf, math.inf, sd
    r = c * sd / math.sqrt(n)
    return mean, mean - r, mean + r, sd


def running_interval(diffs: Sequence[float], rule) -> Tuple[float, float, float, Optional[float]]:
    """`log_interval`, and for a sequential rule the running intersection of every look's
    interval (each holds at once, so their intersection does: never wider later; looks that
    disagree, the model off (a trend?): the latest alone)."""
    mean, lo, hi, sd = log_interval(diffs, rule)
    if not isinstance(rule, Fixed):
        for n in range(2, len(diffs)):
            _, lo_n, hi_n, _ = log_interval(diffs[:n], rule)
            lo, hi = max(lo, lo_n), min(hi, hi_n)
        if lo > hi:
            _, lo, hi, _ = log_interval(diffs, rule)
    return mean, lo, hi, sd


def paired_logs(a: Sequence[Optional[float]], b: Sequence[Optional[float]]) -> List[float]:
    """log(a_i / b_i) of the rounds where both rates are there and positive."""
    return [math.log(x / y) for x, y in zip(a, b)
            if x is not None and y is not None and x > 0 and y > 0]


def outcome(a: Sequence[Optional[float]], b: Sequence[Optional[float]], margin: float,
            rule) -> Outcome:
    """The outcome of comparing rates `a` with rates `b` (paired by position: a round each; a
    round where either is missing or not positive is skipped) under `rule`."""
    diffs = paired_logs(a, b)
    if not diffs:
        return Outcome(OPEN, None, 0.0, math.inf, 0)
    mean, lo, hi, sd = running_interval(diffs, rule)
    kind = side(lo, hi, math.log1p(margin), FASTER, SLOWER, EQUAL) or (
        AT_MARGIN if at_margin(mean, lo, hi, margin) else OPEN)
    return Outcome(kind, math.exp(mean), _exp(lo), _exp(hi), len(diffs), sd)


def side(lo: float, hi: float, edge: float, above: str, below: str, within: str) -> Optional[str]:
    """Where an interval [lo, hi] of a paired mean (a log ratio, a difference) lies, for every
    half of a comparison: `above` 0, `below` 0, `within` [-edge, edge]; None: none of them."""
    return above if lo > 0 else below if hi < 0 else within if -edge <= lo and hi <= edge else None


def at_margin(mean: float, lo: float, hi: float, margin: float) -> bool:
    """The band around the margin's edge e = log(1 + margin), on the log ratio: the estimate
    nearer the edge than 1 or twice the edge (e/2 <= |mean| <= 3e/2) and the whole interval
    inside twice the margin (-2e <= lo, hi <= 2e). Then the ratio is within about one margin of
    the edge: 1.04x [0.99, 1.10] at +-5 % (a true ratio at the edge settles neither as equal
    nor as different, however many rounds: the README sweep's baseline comparison ran 171)."""
    edge = math.log1p(margin)
    return edge / 2 <= abs(mean) <= 1.5 * edge and -2 * edge <= lo and hi <= 2 * edge


def rounds_to_settle(mean: float, sd: Optional[float], margin: float, rule, start: int,
                     most: int = 1000) -> Optional[int]:
    """The rounds after which `rule` would settle a mean log ratio `mean` with spread `sd` if
    both stayed as measured (about an even chance: the next rounds' mean is as likely above as
    below): the least n >= start whose half-width c(n) sd / sqrt(n) is under |mean| (faster or
    slower), under log(1 + margin) - |mean| (equal) or, with the estimate in the band around the
    margin's edge (`at_margin`), under 2 log(1 + margin) - |mean| (at the margin); None past
    `most` or without a spread."""
    if sd is None or sd <= 0:
        return None
    edge = math.log1p(margin)
    room = max(abs(mean), edge - abs(mean),
               2 * edge - abs(mean) if edge / 2 <= abs(mean) <= 1.5 * edge else 0.0)
    for n in range(max(start, 2), most + 1):
        if rule.multiplier(n) * sd / math.sqrt(n) < room:
            return n
    return None


def _exp(x: float) -> float:
    return 0.0 if x == -math.inf else math.inf if x == math.inf else math.exp(x)


# --- the accuracy half: a difference in points, on the additive scale --------------------------

MORE, LESS, AS_ACCURATE = "more accurate", "less accurate", "as accurate"
ACCURACY_SETTLED = (MORE, LESS, AS_ACCURATE)


@dataclass(frozen=True)
class Difference:
    """Set-up A's final eval metric less set-up B's (accuracy: points), paired by round."""
    kind: str               # MORE | LESS | AS_ACCURATE | OPEN
    diff: float             # the mean paired difference
    low: float              # its interval (-inf / inf when unbounded)
    high: float
    rounds: int
    spread: Optional[float] = None  # the sample sd of the paired differences (None under 2)

    @property
    def settled(self) -> bool:
        return self.kind in ACCURACY_SETTLED


def difference(a: Sequence[Optional[float]], b: Sequence[Optional[float]], margin: float,
               rule) -> Optional[Difference]:
    """The accuracy outcome of `a` against `b` (points, paired by position; a round where either
    is missing is skipped) under `rule`, the same rule as the speed half (`running_interval` on
    the differences instead of the log ratios): *more accurate* (the interval above 0), *less
    accurate* (below 0), *as accurate* (inside [-margin, margin]), else not settled. None when
    no round has both."""
    diffs = [x - y for x, y in zip(a, b) if x is not None and y is not None]
    if not diffs:
        return None
    mean, lo, hi, sd = running_interval(diffs, rule)
    kind = side(lo, hi, margin, MORE, LESS, AS_ACCURATE) or OPEN
    return Difference(kind, mean, lo, hi, len(diffs), sd)


def rounds_to_settle_difference(mean: float, sd: Optional[float], margin: float, rule,
                                start: int, most: int = 1000) -> Optional[int]:
    """`rounds_to_settle` on the additive scale: the least n >= start whose half-width
    c(n) sd / sqrt(n) is under |mean| (more or less accurate) or margin - |mean| (as accurate)."""
    if sd is None or sd <= 0:
        return None
    room = max(abs(mean), margin - abs(mean))
    for n in range(max(start, 2), most + 1):
        if rule.multiplier(n) * sd / math.sqrt(n) < room:
            return n
    return None


# --- time to a target: the log ratio of the times, paired by round; a miss is never a time -----

SOONER, LATER, AS_SOON, MISSES = "sooner", "later", "as soon", "misses"


@dataclass(frozen=True)
class TimeToTarget:
    """Set-up B's time to the target over set-up A's (above 1: A reaches it sooner), paired by
    round, or the misses: a run that completed without reaching the target is a miss."""
    kind: str               # SOONER | LATER | AS_SOON | OPEN | MISSES
    ratio: Optional[float]  # exp(mean log(t_B / t_A)) over the rounds both reached it (None: none)
    low: float              # its interval (0 / inf when unbounded)
    high: float
    rounds: int             # paired rounds (both runs completed)
    misses: Tuple[int, int] = (0, 0)  # rounds A missed it, rounds B missed it (of `rounds`)
    spread: Optional[float] = None

    @property
    def settled(self) -> bool:
        return self.kind in (SOONER, LATER, AS_SOON)


def time_to_target(a: Sequence[Optional[float]], b: Sequence[Optional[float]], margin: float,
                   rule) -> Optional[TimeToTarget]:
    """Set-up A's time to the target against B's, paired by position (seconds; math.inf: the run
    completed and missed the target; None: no run, skipped). Where either missed in a paired
    round the outcome is MISSES with the counts (a miss is never a time: no ratio is claimed);
    else the log ratios log(t_B / t_A) under `rule` (`running_interval`, as the speed half):
    *sooner* (interval above 1), *later* (below), *as soon* (inside [1/(1+margin), 1+margin]),
    else not settled. None when no round has both."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if not pairs:
        return None
    misses = (sum(math.isinf(x) for x, _ in pairs), sum(math.isinf(y) for _, y in pairs))
    if any(misses):
        return TimeToTarget(MISSES, None, 0.0, math.inf, len(pairs), misses)
    logs = [math.log(y / x) for x, y in pairs if x > 0 and y > 0]
    if not logs:
        return TimeToTarget(OPEN, None, 0.0, math.inf, len(pairs))
    mean, lo, hi, sd = running_interval(logs, rule)
    kind = side(lo, hi, math.log1p(margin), SOONER, LATER, AS_SOON) or OPEN
    return TimeToTarget(kind, math.exp(mean), _exp(lo), _exp(hi), len(pairs), spread=sd)
