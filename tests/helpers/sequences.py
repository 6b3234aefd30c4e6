"""Simulated sweeps, many at once (numpy): the rates of two set-ups round by round, and the round
at which each sequence's comparison first settles under a rule, as distexp.figures.sequential's
`outcome` decides it (tests/figures/test_sequential.py checks the two agree sequence by sequence).
Used by the error-rate tests, which need 10^5 sequences to see a rule spend 1.5x its alpha."""
from __future__ import annotations

import math

import numpy as np

OPEN, FASTER, SLOWER, EQUAL = 0, 1, -1, 2
DRIFT = 0.10  # sd of the drift shared by a round's runs (the machine's slow and fast periods)
# The seed noise of the default job's final eval accuracy, points: the sd over 6 seeds of
# `python -m distexp -m seed=0,1,2,3,4,5` on this machine (94.17 95.56 94.17 96.67 95.83 95.28;
# docs/sweeps.md, "The accuracy half").
SEED_SD = 0.98


def log_rates(seed, n, rounds, ratio=1.0, sd=0.15, heavy=False, trend=0.0, position=0.0, setups=2):
    """(n, setups, rounds) log examples/s: a drift shared by the round (sd DRIFT, and `trend` a
    round: the machine slowing), each run's own noise (sd `sd`; Student t with 3 degrees of
    freedom scaled to that sd when `heavy`), set-up 0 `ratio` times the others; `position`: the
    job run first in a round is that much slower, set-up 0 first in even rounds and set-up 1 in
    odd ones (counterbalanced, as the sweeper rotates a round)."""
    rng = np.random.default_rng(seed)
    r = np.arange(1, rounds + 1)
    drift = rng.normal(0, DRIFT, (n, 1, rounds)) - trend * r
    if heavy:
        noise = rng.standard_t(3, (n, setups, rounds)) * sd / math.sqrt(3)
    else:
        noise = rng.normal(0, sd, (n, setups, rounds))
    out = drift + noise
    out[:, 0] += math.log(ratio)
    if position:
        out[:, 0] -= np.where(r % 2 == 0, position, 0.0)
        out[:, 1] -= np.where(r % 2 == 1, position, 0.0)
    return out


def accuracies(seed, n, rounds, diff=0.0, sd=SEED_SD, setups=2):
    """(n, setups, rounds) final accuracies in points: each run its own seed noise (sd `sd`),
    set-up 0 `diff` points above the others."""
    rng = np.random.default_rng(seed)
    out = 95.0 + rng.normal(0, sd, (n, setups, rounds))
    out[:, 0] += diff
    return out


def first_settled(d, rule, margin=0.05, additive=False):
    """d: (sequences, rounds) paired log ratios (`additive`: paired differences, the accuracy
    half, margin in their unit). Per sequence the outcome code (OPEN, FASTER (more accurate),
    SLOWER (less), EQUAL) of the first round whose outcome is settled and that round (rounds + 1
    when none): sequential.outcome's (difference's) interval at each round, the running
    intersection of every look's interval (the latest alone once they disagree), the rule's
    multiplier c(n) of s / sqrt(n)."""
    m, rounds = d.shape
    total, squares = np.cumsum(d, 1), np.cumsum(d * d, 1)
    lo_all, hi_all = np.full(m, -np.inf), np.full(m, np.inf)
    kind, when = np.zeros(m, int), np.full(m, rounds + 1)
    edge = margin if additive else math.log1p(margin)
    for n in range(2, rounds + 1):
        mean = total[:, n - 1] / n
        sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean * mean, 0) / (n - 1))
        c = rule.multiplier(n)
        half = c * sd / math.sqrt(n) if math.isfinite(c) else np.full(m, np.inf)
        lo_n, hi_n = mean - half, mean + half
        lo_all, hi_all = np.maximum(lo_all, lo_n), np.minimum(hi_all, hi_n)
        apart = lo_all > hi_all
        lo, hi = np.where(apart, lo_n, lo_all), np.where(apart, hi_n, hi_all)
        k = np.where(lo > 0, FASTER, np.where(hi < 0, SLOWER,
                                              np.where((-edge <= lo) & (hi <= edge), EQUAL, OPEN)))
        new = (kind == OPEN) & (k != OPEN)
        kind[new], when[new] = k[new], n
    return kind, when


def wrong(kind) -> float:
    """The share of sequences that settled "faster" or "slower"."""
    return float(np.mean((kind == FASTER) | (kind == SLOWER)))


def se(p: float, n: int) -> float:
    """The standard error of a proportion p observed in n sequences."""
    return math.sqrt(p * (1 - p) / n)
