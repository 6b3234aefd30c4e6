"""repeats=auto's statistics (distexp.figures.sequential): the boundary against the papers'
formulas, the error rate of "stop when settled" in simulated A/A sweeps (against the naive
"Welch after each round" rule), and the rounds a real difference takes. Pure Python, seeded.

Noise in the simulations: each run's log examples/s = a drift shared by the round (sd 0.10: the
machine's slow and fast periods) + the run's own noise, sd 0.05 (~5 % run-to-run CV on a quiet
machine) or 0.15 (the 2-core machine shared by other work: the README sweep's 3-run interval
[0.78, 1.58] is ~0.15 a run), normal or Student t with 3 degrees of freedom (heavy tails) scaled
to the same sd.
"""
import math
import random
import statistics

import pytest

from distexp.figures import sequential as S
from distexp.figures import stats

N_SIM = 1000
ALPHA = 0.05
# The binomial allowance: the observed rate of N_SIM sequences may exceed alpha by 3 standard
# errors of a binomial proportion at alpha (0.021 for 1000) before the test fails.
ALLOWANCE = 3 * math.sqrt(ALPHA * (1 - ALPHA) / N_SIM)
DRIFT = 0.10


def _noise(rng, sd, heavy):
    if not heavy:
        return rng.gauss(0, sd)
    chi2 = rng.gammavariate(1.5, 2)  # chi-square with 3 degrees of freedom; t3 has variance 3
    return rng.gauss(0, 1) / math.sqrt(chi2 / 3) * sd / math.sqrt(3)


def _rounds(rng, ratio, sd, heavy):
    """One round's pair of rates (A, B) with A = ratio x B in expectation (log scale)."""
    d = rng.gauss(0, DRIFT)
    return (math.exp(d + math.log(ratio) + _noise(rng, sd, heavy)),
            math.exp(d + _noise(rng, sd, heavy)))


def _welch_p(a, b):
    """Welch's two-sided p-value for mean log a = mean log b (distexp.figures.stats's t)."""
    (ma, va), (mb, vb) = (stats._mean_var([math.log(x) for x in s]) for s in (a, b))
    sa, sb = va / len(a), vb / len(b)
    if sa + sb == 0:
        return 1.0
    df = (sa + sb) ** 2 / (sa * sa / (len(a) - 1) + sb * sb / (len(b) - 1))
    return 2 * (1 - stats.t_cdf(abs(ma - mb) / math.sqrt(sa + sb), df))


def _paired_p(a, b):
    """The paired t-test's two-sided p-value on the same log ratios the auto rule sees."""
    m, v = stats._mean_var([math.log(x / y) for x, y in zip(a, b)])
    if v == 0:
        return 1.0
    return 2 * (1 - stats.t_cdf(abs(m) / math.sqrt(v / len(a)), len(a) - 1))


def _simulate(ratio, sd, heavy, alpha, max_rounds, seed, naive=None, n=N_SIM):
    """(outcome kinds, rounds each sequence ran) over n sequences stopped by the rule (`naive`:
    a p-value function, stop at p < alpha)."""
    rng = random.Random(seed)
    g = S.mixing_g(alpha, math.ceil(max_rounds / 2))
    kinds, used = {}, []
    for _ in range(n):
        a, b, kind = [], [], S.OPEN
        for r in range(1, max_rounds + 1):
            x, y = _rounds(rng, ratio, sd, heavy)
            a.append(x)
            b.append(y)
            if naive:
                if r >= 2 and naive(a, b) < alpha:
                    kind = S.FASTER if sum(a) > sum(b) else S.SLOWER
                    break
            else:
                kind = S.outcome(a, b, alpha, 0.05, g).kind
                if kind in S.SETTLED:
                    break
        kinds[kind] = kinds.get(kind, 0) + 1
        used.append(r)
    return kinds, used


def _wrong(kinds):
    return (kinds.get(S.FASTER, 0) + kinds.get(S.SLOWER, 0)) / sum(kinds.values())


def test_normal_mixture_radius_is_the_papers_boundary():
    """Waudby-Smith et al. Theorem 2.2 / Robbins' normal mixture: the half-width r after n
    observations is where the mixture martingale (1 + rho^2 V)^(-1/2) exp(rho^2 S^2 /
    (2 (1 + rho^2 V))), S = n r, V = n var, reaches 1/alpha; and two values worked by hand."""
    for n, var, alpha, rho in ((10, 1.0, 0.05, 1.0), (5, 0.01, 0.0167, 3.0),
                               (100, 0.0049, 0.01, 5.0)):
        r = S.normal_mixture_radius(n, var, alpha, rho)
        v = n * var
        m = (1 + rho ** 2 * v) ** -0.5 * math.exp(rho ** 2 * (n * r) ** 2 / (2 * (1 + rho ** 2 * v)))
        assert m == pytest.approx(1 / alpha, rel=1e-9)
    # n=10, var=1, alpha=0.05, rho=1: sqrt(2*11/100 * log(sqrt(11)/0.05)) = sqrt(0.22*4.194680)
    assert S.normal_mixture_radius(10, 1.0, 0.05, 1.0) == pytest.approx(0.960640, abs=1e-6)
    # n=4, var=0.0025 (5 % CV), alpha=0.05, rho=10: x = 2, sqrt(2*2/1600 * log(sqrt(2)/0.05))
    assert S.normal_mixture_radius(4, 0.0025, 0.05, 10.0) == pytest.approx(0.091410, abs=1e-6)


def test_t_mixture_reaches_one_over_alpha_at_its_boundary_and_tends_to_the_normal_mixture():
    for n, alpha, g in ((4, 0.05, 3.0), (8, 0.0167, 2.0), (30, 0.01, 0.5)):
        t2 = S.t_mixture_bound(n, alpha, g)
        assert S.t_mixture_factor(n, math.sqrt(t2), g) == pytest.approx(1 / alpha, rel=1e-9)
        assert S.t_mixture_factor(n, 0.99 * math.sqrt(t2), g) < 1 / alpha
    # two observations cannot reach 1/alpha = 20 with g = 2: the factor is at most (1+2g)^(1/2)
    assert S.t_mixture_bound(2, 0.05, 2.0) == math.inf
    # large n: the sample sd is the sd, and the t mixture is the normal mixture, rho^2 var = g
    n, sd, alpha, g = 100_000, 0.07, 0.05, 2.0
    t_r = S.t_mixture_radius(n, sd, alpha, g)
    assert t_r == pytest.approx(S.normal_mixture_radius(n, sd * sd, alpha, math.sqrt(g) / sd),
                                rel=1e-3)


def test_outcomes_and_their_text():
    g = S.mixing_g(0.05, 5)
    base = [1000, 1010, 990, 1005, 995, 1000]
    faster = S.outcome([1.3 * x * (1 + 0.01 * (-1) ** i) for i, x in enumerate(base)], base,
                       0.05, 0.05, g)
    assert faster.kind == S.FASTER and faster.low > 1 and faster.ratio == pytest.approx(1.3,
                                                                                        rel=0.01)
    assert faster.text(0.05).endswith("faster")
    slower = S.outcome(base, [1.3 * x * (1 + 0.01 * (-1) ** i) for i, x in enumerate(base)],
                       0.05, 0.05, g)
    assert slower.kind == S.SLOWER and slower.high < 1
    equal = S.outcome([x * (1 + 0.002 * (-1) ** i) for i, x in enumerate(base)], base, 0.05,
                      0.05, g)
    assert equal.kind == S.EQUAL and 1 / 1.05 <= equal.low and equal.high <= 1.05
    assert "equal within +-5%" in equal.text(0.05)
    two = S.outcome([1300, 1310], [1000, 1000], 0.05, 0.05, g)
    assert two.kind == S.OPEN and two.high == math.inf
    assert two.text(0.05) == "1.30x [0.00, inf] not settled after 2 rounds"


@pytest.mark.parametrize("heavy", [False, True], ids=["normal", "t3"])
def test_a_a_sweeps_stopped_when_settled_claim_a_difference_at_most_alpha(heavy, capsys):
    """Identical set-ups, 10 rounds at most, stopped as soon as the rule settles: "faster" or
    "slower" in <= alpha (+ ALLOWANCE) of the sequences. The naive rules on the same noise, a
    fixed-n test after each round, stop at p < alpha: the paired t-test (the auto rule's own
    pairing) claims one beyond alpha's allowance; Welch's (unpaired: the round's drift is
    noise to it, which makes it conservative, more so with heavy tails) more often than the
    auto rule."""
    kinds, _ = _simulate(1.0, 0.15, heavy, ALPHA, 10, seed=1)
    paired, _ = _simulate(1.0, 0.15, heavy, ALPHA, 10, seed=1, naive=_paired_p)
    welch, _ = _simulate(1.0, 0.15, heavy, ALPHA, 10, seed=1, naive=_welch_p)
    rate = _wrong(kinds)
    with capsys.disabled():
        print(f"\nA/A ({'t3' if heavy else 'normal'}, drift {DRIFT}, sd 0.15, {N_SIM} sequences, "
              f"<= 10 rounds, alpha {ALPHA}): repeats=auto {rate:.3f}; naive, stopped at the "
              f"first p < alpha: paired t {_wrong(paired):.3f}, Welch {_wrong(welch):.3f}")
    assert rate <= ALPHA + ALLOWANCE
    assert _wrong(paired) > ALPHA + ALLOWANCE
    assert _wrong(paired) > 3 * rate and _wrong(welch) > 2 * rate


def test_many_rounds_still_hold_alpha():
    """The guarantee is for every n at once: 40 rounds of looking still stay within alpha."""
    kinds, _ = _simulate(1.0, 0.05, False, ALPHA, 40, seed=2, n=300)
    assert _wrong(kinds) <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / 300)


def _power(ratio, sd, seed):
    alpha = ALPHA / 3  # the README sweep: 3 comparisons (Bonferroni)
    kinds, used = _simulate(ratio, sd, False, alpha, 10, seed=seed, n=300)
    used.sort()
    return kinds.get(S.FASTER, 0) / len(used), statistics.median(used), used[int(0.9 * len(used)) - 1]


def test_power_rounds_to_settle_a_real_difference(capsys):
    """A 10 % and a 30 % difference, sd 0.05 a run (quiet machine), alpha 0.05 / 3, <= 10 rounds:
    the share settled "faster", the median and 90th percentile of rounds (docs/sweeps.md)."""
    out = {(r, sd): _power(r, sd, seed=3) for r in (1.1, 1.3) for sd in (0.05, 0.15)}
    with capsys.disabled():
        for (r, sd), (share, med, p90) in out.items():
            print(f"\npower: {r:.1f}x at sd {sd}: settled faster {share:.2f}, rounds median "
                  f"{med:g}, p90 {p90}")
    share, med, p90 = out[(1.3, 0.05)]
    assert share == 1.0 and med <= 6 and p90 <= 7
    share, med, _ = out[(1.1, 0.05)]
    assert share >= 0.4
    assert out[(1.1, 0.15)][0] < share  # more noise, less settled: no free lunch


def test_the_plug_in_normal_mixture_is_too_narrow_for_few_rounds():
    """Why the t mixture: the asymptotic sequence (the normal mixture with the sample variance
    plugged in) on the same A/A data, <= 10 rounds, claims a difference far beyond alpha."""
    rng = random.Random(5)
    g, wrong = S.mixing_g(ALPHA, 5), 0
    for _ in range(N_SIM):
        d = []
        for n in range(1, 11):
            d.append(rng.gauss(0, 0.07))
            if n < 2:
                continue
            m = sum(d) / n
            sd = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1))
            if abs(m) > S.normal_mixture_radius(n, sd * sd, ALPHA, math.sqrt(g) / sd):
                wrong += 1
                break
    assert wrong / N_SIM > 3 * ALPHA  # 0.24 with this seed
