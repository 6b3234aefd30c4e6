"""Time to a target (issue 51 item 3): with target_accuracy set, each comparison also on the time
to it, the log ratio t_B / t_A paired by round under the sweep's rule; a run that misses the
target counts as a miss, never as a time (distexp.figures.sequential.time_to_target), rendered
from the record by every surface (distexp.figures.outcomes.time_text). Pure Python, fixed inputs.
"""
import json
import math
import statistics

from distexp.figures import outcomes as O
from distexp.figures import sequential as S
from distexp.figures import stats

INF = math.inf


def test_paired_log_ratios_under_the_fixed_sample_rule():
    a, b = [10.0, 12.0, 11.0, 9.0], [13.0, 15.0, 14.5, 12.0]
    logs = [math.log(y / x) for x, y in zip(a, b)]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = stats.t_quantile(1 - 0.05 / 2, 3) * sd / 2  # n = 4: sqrt(n) = 2
    got = S.time_to_target(a, b, 0.05, S.Fixed(0.05))
    assert got.kind == S.SOONER and got.rounds == 4 and got.misses == (0, 0)
    assert math.isclose(got.ratio, math.exp(mean)) and math.isclose(got.spread, sd)
    assert math.isclose(got.low, math.exp(mean - half)) and math.isclose(got.high,
                                                                          math.exp(mean + half))
    assert round(got.ratio, 4) == 1.3  # (13/10 x 15/12 x 14.5/11 x 12/9)^(1/4) = 1.29999...
    # the other way round: later, the same interval inverted
    back = S.time_to_target(b, a, 0.05, S.Fixed(0.05))
    assert back.kind == S.LATER and math.isclose(back.ratio, 1 / got.ratio)


def test_a_miss_is_counted_never_a_time():
    # rounds: both reach; a misses; both miss; a's run failed (None: not paired); b misses
    a = [10.0, INF, INF, None, 9.0]
    b = [12.0, 11.0, INF, 13.0, INF]
    got = S.time_to_target(a, b, 0.05, S.Fixed(0.05))
    assert (got.kind, got.rounds, got.misses, got.ratio) == (S.MISSES, 4, (2, 2), None)
    assert not got.settled
    assert S.time_to_target([None, 3.0], [4.0, None], 0.05, S.Fixed(0.05)) is None


def test_as_soon_and_not_settled():
    rule = S.Fixed(0.05)
    same = S.time_to_target([10.0, 10.2, 9.9, 10.1, 10.0, 10.05], [10.05, 10.1, 10.0, 10.1,
                                                                     10.02, 10.0], 0.05, rule)
    assert same.kind == S.AS_SOON
    noisy = S.time_to_target([10.0, 20.0, 10.0], [15.0, 12.0, 14.0], 0.05, rule)
    assert noisy.kind == S.OPEN and noisy.ratio is not None


def _record(**kw) -> O.Record:
    base = dict(a=1, b=0, names=["one_device x1 batch 256", "one_device x1 batch 32"],
                kind=O.BASELINE, ratio=3.77, low=1.85, high=7.69, outcome="faster", rounds=6,
                method="repeated confidence intervals", accuracy=-9.1, accuracy_low=-16.6,
                accuracy_high=-1.5, accuracy_outcome="less accurate", accuracy_rounds=6,
                same_maths=False, target=0.95)
    return O.Record(**{**base, **kw})


def test_the_rendered_lines_exactly():
    sooner = _record(time_ratio=1.3, time_low=1.1, time_high=1.6, time_outcome="sooner",
                     time_rounds=6)
    assert O.time_text(sooner, 0.05) == "reaches 0.95 1.30x sooner [1.10, 1.60]"
    assert O.text(sooner, 0.05, 0.5) == (
        "one_device x1 batch 256 vs one_device x1 batch 32, baseline: 3.77x [1.85, 7.69] faster; "
        "accuracy -9.1 pt [-16.6, -1.5], less accurate by 9.1 pt: faster, but less accurate; "
        "reaches 0.95 1.30x sooner [1.10, 1.60]")
    # over 120 columns: cut before each half that does not fit, continued lines indented
    assert O.wrapped(O.text(sooner, 0.05, 0.5)) == [
        "one_device x1 batch 256 vs one_device x1 batch 32, baseline: 3.77x [1.85, 7.69] faster;",
        "  accuracy -9.1 pt [-16.6, -1.5], less accurate by 9.1 pt: faster, but less accurate;",
        "  reaches 0.95 1.30x sooner [1.10, 1.60]"]
    later = _record(time_ratio=0.8, time_low=0.5, time_high=None, time_outcome="not settled")
    assert O.time_text(later, 0.05) == "reaches 0.95 1.25x later [0.00, 2.00], not settled"
    later = _record(time_ratio=0.8, time_low=0.625, time_high=0.9, time_outcome="later")
    assert O.time_text(later, 0.05) == "reaches 0.95 1.25x later [1.11, 1.60]"
    same = _record(time_ratio=1.01, time_low=0.98, time_high=1.03, time_outcome="as soon")
    assert O.time_text(same, 0.05) == "reaches 0.95 as soon: 1.01x [0.98, 1.03], within +-5%"
    missed = _record(time_outcome="misses", time_rounds=6, time_misses=[2, 0])
    assert O.time_text(missed, 0.05) == "misses 0.95 in 2 of 6 runs, the baseline in 0"
    theirs = _record(time_outcome="misses", time_rounds=6, time_misses=[0, 3], kind=O.EQUAL_WORK)
    assert O.time_text(theirs, 0.05) == "reaches 0.95 in all 6 runs, its control misses it in 3"
    assert O.time_text(_record(target=None), 0.05) == ""
    assert O.time_text(_record(), 0.05) == "time to 0.95: no paired runs (none with both runs' times)"
    assert O.cell(missed, 0.05, 0.5).endswith(
        "faster, but less accurate; misses 0.95 in 2 of 6 runs, the baseline in 0")


def test_rounds_decide_the_time_half_with_the_alpha_split_over_three_halves(tmp_path):
    from distexp.sweeps import auto
    from distexp.sweeps.planning import Setup

    rounds = auto.Rounds([], lambda o: None, 0.05, 0.05, 10)
    setups = [Setup(1, 32, (("m", "a"),)), Setup(1, 256, (("m", "a"),))]
    rounds.pairs = auto.comparisons(setups)
    rounds.jobs, rounds.names = [["a"], ["b"]], ["batch 32", "batch 256"]
    rounds.target = 0.95
    rounds.alpha_each = 0.05 / 3  # what __init__ sets with a target: 3 halves x 1 comparison
    rounds.rule = S.planned(rounds.alpha_each, 10)
    rounds.rates, rounds.windows, rounds.nums = [[], []], [[], []], [[], []]
    rounds.accuracies, rounds.times = [[], []], [[], []]
    for r, (ta, tb) in enumerate([(20.0, 8.0), (22.0, 9.0), (INF, 8.5), (21.0, 8.0)]):
        rounds.record({0: 100.0, 1: 300.0 + r}, accuracies={0: 97.0, 1: 88.0 + r / 10},
                      times={0: ta, 1: tb})
    rec = rounds.decision().of(1, O.BASELINE)
    assert (rec.time_outcome, rec.time_rounds, rec.time_misses) == ("misses", 4, [0, 1])
    assert O.time_text(rec, 0.05) == "reaches 0.95 in all 4 runs, the baseline misses it in 1"
    # a disturbed run: its time leaves the pairs (time is what a disturbance moves), a miss stays
    for t in (19.0, INF):
        rounds.record({0: 100.0, 1: 300.0}, windows={0: (1.0, "disturbed: load")},
                      accuracies={0: 97.0, 1: 88.0}, times={0: t, 1: 8.0})
    assert [rounds.times[0][-2], rounds.times[0][-1]] == [None, INF]
    rec = rounds.decision().of(1, O.BASELINE)
    assert (rec.time_rounds, rec.time_misses) == (5, [0, 2])
    d = rounds.decision()
    assert d.target_accuracy == 0.95 and ", alpha 0.05 over 1 comparison x 3 halves (speed, accuracy, " \
        "time to 0.95), margins +-5% (speed, time), +-0.5 pt (accuracy)" in O.heading(d)
    assert all(len(x) <= 120 for x in O.closing_lines(d))


def test_the_target_and_a_jobs_time_read_from_its_files(tmp_path):
    from omegaconf import OmegaConf

    from distexp.sweeps import auto, job_figures

    def cfg(t):
        return OmegaConf.create({"target_accuracy": t})

    assert auto.target_of([cfg(0.95), cfg(0.95), None]) == 0.95
    assert auto.target_of([cfg(0.95), cfg(0.9)]) is None and auto.target_of([cfg(None)]) is None

    def job(result, status="COMPLETED"):
        d = tmp_path / str(len(list(tmp_path.iterdir())))
        d.mkdir()
        (d / "result.json").write_text(json.dumps(result))
        return {"status": status, "job_dir": str(d)}

    assert job_figures.time_of(job({job_figures.TIME: 12.5})) == 12.5
    assert job_figures.time_of(job({job_figures.TIME: None})) == INF  # completed, missed: a miss
    assert job_figures.time_of(job({job_figures.TIME: 12.5}, "FAILED")) is None
    assert job_figures.time_of(job({"perf/examples_per_sec": 3.0})) is None  # no target: no figure
    assert job_figures.time_of(job({job_figures.TIME: 3.0, "diverged": True})) is None


def test_a_target_sweeps_alpha_is_split_over_three_halves(compose):
    """The README sweep's 3 comparisons with target_accuracy set: alpha / 9 (3 comparisons x
    speed, accuracy and time to the target); without it alpha / 6; targets that differ between
    the set-ups: no time half (alpha / 6)."""
    from distexp.sweeps import auto, planning

    base = ["cpu_replicas=2", "epochs=1"]
    jobs = [["strategy=one_device", *base], ["strategy=mirrored", *base],
            ["strategy=one_device", *base, "global_batch_size=128"]]

    def setup_of(overrides):  # as distexp.sweeps.sweep.Sweep.setup_of: (config, set-up)
        cfg = compose(*overrides)
        return cfg, planning.setup(cfg)

    def rounds(*extra):
        return auto.Rounds([[*j, *extra] for j in jobs], setup_of, 0.05, 0.05, 10, controls=[2])

    got = rounds("target_accuracy=0.95")
    assert len(got.pairs) == 3 and got.target == 0.95 and math.isclose(got.alpha_each, 0.05 / 9)
    assert got.rule.alpha == got.alpha_each and got.decision().target_accuracy == 0.95
    plain = rounds()
    assert plain.target is None and math.isclose(plain.alpha_each, 0.05 / 6)
    mixed = auto.Rounds([[*jobs[0], "target_accuracy=0.9"], [*jobs[1], "target_accuracy=0.95"]],
                        setup_of, 0.05, 0.05, 10)
    assert mixed.target is None and math.isclose(mixed.alpha_each, 0.05 / 2)
