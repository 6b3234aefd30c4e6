"""repeats=auto through the real sweeper (no TensorFlow, nothing trained): a launcher that writes
each job's record and result.json with a rate from a seeded model of the set-ups, the rounds the
sweep runs, which set-ups leave, the one line per round, the outcomes; and the refusals."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from distexp.errors import UserError
from distexp.figures import sequential as seq
from helpers import sequences as seqs
from helpers import sweeper as _sweeper


class RateLauncher:
    """Writes what the callback and the trainer would: sweep_jobs/<num>.json and result.json."""

    def __init__(self, sweep_dir: Path, speed, sd=0.03, seed=0, starve=None, accuracy=None):
        self.sweep_dir, self.speed, self.sd = sweep_dir, speed, sd
        self.rng = random.Random(seed)
        # accuracy(overrides): the set-up's mean final accuracy in points, each run +- the seed
        # noise measured on this machine (seqs.SEED_SD; its own generator: the rates unchanged)
        self.accuracy, self.acc_rng = accuracy, random.Random(seed + 1)
        self.launched = []
        # {job number: (rate factor, CPU/wall, the job's own `disturbed` reason or None)}: a run
        # starved by a competing process (the others' CPU/wall: 1.25)
        self.starve = starve or {}

    def launch(self, job_overrides, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus

        out = []
        drift = self.rng.gauss(0, 0.1)
        for i, overrides in enumerate(job_overrides):
            num = initial_job_idx + i
            self.launched.append((num, list(overrides)))
            job_dir = self.sweep_dir / str(num)
            job_dir.mkdir(parents=True, exist_ok=True)
            rate = 1000 * self.speed(overrides) * math.exp(drift + self.rng.gauss(0, self.sd))
            factor, cpu_wall, reason = self.starve.get(num, (1.0, 1.25, None))
            result = {"perf/examples_per_sec": rate * factor, "cpu_seconds_timed": 2.0 * cpu_wall,
                      "timed_seconds": 2.0, "timed_steps": 100, "disturbed": reason}
            if self.accuracy is not None:
                result["eval/accuracy"] = (self.accuracy(overrides)
                                           + self.acc_rng.gauss(0, seqs.SEED_SD)) / 100
            (job_dir / "result.json").write_text(json.dumps(result))
            (self.sweep_dir / "sweep_jobs").mkdir(exist_ok=True)
            (self.sweep_dir / "sweep_jobs" / f"{num}.json").write_text(json.dumps(
                {"num": num, "overrides": overrides, "status": "COMPLETED", "value": 0.9,
                 "error": None, "job_dir": str(job_dir)}))
            ret = JobReturn(overrides=list(overrides), _return_value=0.9)
            ret.status = JobStatus.COMPLETED
            out.append(ret)
        return out


def _auto_sweep(tmp_path, speed, *args, sd=0.03, starve=None, accuracy=None):
    from hydra.core.global_hydra import GlobalHydra

    try:
        sweeper = _sweeper(tmp_path, *(a for a in args if "," not in a))
        sweeper.launcher = RateLauncher(tmp_path, speed, sd, starve=starve, accuracy=accuracy)
        # Hydra's check composes every job again (the real launcher's run reuses the sweeper's
        # configs, distexp_sweeper._composed_once): seconds a round here, nothing to learn
        sweeper.validate_batch_is_legal = lambda batch: None
        sweeper.sweep(list(args))
        return sweeper.launcher.launched
    finally:
        GlobalHydra.instance().clear()


def _mirrored_faster(overrides):
    """mirrored x2 1.3x one replica at equal work; one_device at batch 128 1.5x at batch 64."""
    if "strategy=mirrored" in overrides:
        return 1.5 * 1.3
    return 1.5 if "global_batch_size=128" in overrides else 1.0


def test_rounds_until_settled_then_stop(tmp_path, capsys):
    launched = _auto_sweep(tmp_path, _mirrored_faster, "strategy=one_device,mirrored", "cpu_replicas=2",
                    "sweep.controls=true", "repeats=auto", "sweep.max_repeats=10")
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("round ")]
    assert len(lines) >= 3 and lines[0].startswith("round 1: mirrored x2 vs control: ")
    assert all(len(ln) <= 120 for ln in lines)
    # three set-ups in round 0, numbered as repeats=N numbers them (round x 3 + set-up), their
    # order rotated by one place a round (counterbalanced)
    assert [n for n, _ in launched[:6]] == [0, 1, 2, 4, 5, 3]
    # sweep.seed_by_round (default): round r runs every set-up with seed 0 + r
    assert all(o[-2:] == [f"repeat={n // 3}", f"seed={n // 3}"] for n, o in launched)
    saved = json.loads((tmp_path / "auto.json").read_text())
    assert saved["repeats"] == "auto" and saved["rounds"] == len(lines)
    assert saved["method"] == "repeated confidence intervals" and saved["horizon"] == 10
    assert saved["setups"] == ["one_device x1 batch 64", "mirrored x2",
                               "one_device x1 batch 128 (control)"]
    equal_work = next(r for r in saved["comparisons"] if r["kind"] == "equal work")
    assert equal_work["names"] == ["mirrored x2", "one_device x1 batch 128 (control)"]
    assert equal_work["outcome"] == "faster"  # 1.3x at 3 % noise: settled within 10 rounds
    assert 1.2 < equal_work["ratio"] < 1.4 and equal_work["low"] > 1
    assert "open" not in lines[-1] and len(lines) < 10  # every comparison settled: stop
    # the last round ran only what was still open
    last = [o for n, o in launched if n // 3 == len(lines) - 1]
    assert 0 < len(last) <= 3


ALPHA = 0.05
MC_N = 100_000  # simulated sweeps (helpers.sequences): 3 standard errors at 4 % are 0.19 %
README_SWEEP = ["strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true",
                "repeats=auto", "sweep.max_repeats=10"]


def _planned_bound():
    """What a sweep's family of comparisons may claim wrongly within its plan: the planned share
    of sweep.alpha, (1 - RESERVE) x alpha, plus 3 standard errors of MC_N sweeps."""
    plan = (1 - seq.RESERVE) * ALPHA
    return plan + 3 * seqs.se(plan, MC_N)


def _sweep_rounds(compose, jobs, max_repeats, controls=()):
    from distexp.sweeps import auto, planning

    def setup_of(overrides):
        cfg = compose(*overrides)
        return cfg, planning.setup(cfg)

    return auto.Rounds(jobs, setup_of, ALPHA, 0.05, max_repeats, controls=controls)


def test_a_a_pair_is_called_faster_or_slower_at_the_planned_rate(tmp_path, capsys, compose):
    """The sweep of two identical set-ups runs its 4 rounds (one comparison, one line a round);
    over MC_N seeded A/A sweeps under the rule that sweep builds, "faster" or "slower" is claimed
    in at most (1 - RESERVE) x alpha of them (3 standard errors); and the sweep's own bookkeeping
    (Rounds.record) settles a few of those sequences exactly as the simulation does."""
    _auto_sweep(tmp_path, lambda o: 1.0, "seed=0,1", "repeats=auto", "sweep.max_repeats=4", sd=0.05)
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "auto.json").read_text())["comparisons"]
    assert len(saved) == 1 and saved[0]["kind"] == "baseline"
    assert saved[0]["outcome"] in ("not settled", "equal") and saved[0]["rounds"] == 4
    assert out.count("\nround ") + out.startswith("round ") == 4
    jobs = [["seed=0", "repeats=auto", "sweep.max_repeats=4"],
            ["seed=1", "repeats=auto", "sweep.max_repeats=4"]]
    rule = _sweep_rounds(compose, jobs, 4).rule
    logs = seqs.log_rates(8, MC_N, 4, sd=0.05)
    kind, when = seqs.first_settled(logs[:, 1] - logs[:, 0], rule)
    assert seqs.wrong(kind) <= _planned_bound(), seqs.wrong(kind)
    # the plan spends the speed half's alpha (alpha / 2: Rounds.alpha_each, both halves of the
    # one comparison): not an interval that never closes
    assert _sweep_rounds(compose, jobs, 4).alpha_each == ALPHA / 2
    assert seqs.wrong(kind) > 0.8 * (1 - seq.RESERVE) * ALPHA / 2
    wrongly = [int(i) for i in (kind == seqs.FASTER).nonzero()[0][:3]]
    for i in [*wrongly, 0, 1, 2]:  # the sweep's record() on those rates: the same outcomes
        rounds = _sweep_rounds(compose, jobs, 4)
        for r in range(4):
            rounds.record({0: math.exp(logs[i, 0, r]), 1: math.exp(logs[i, 1, r])})
        o, named = rounds.pairs[0].outcome, {seqs.FASTER: seq.FASTER, seqs.SLOWER: seq.SLOWER,
                                             seqs.EQUAL: seq.EQUAL, seqs.OPEN: seq.OPEN}
        assert (o.kind, o.rounds) == (named[kind[i]], min(int(when[i]), 4)), i


def test_the_readme_sweeps_alpha_is_split_over_its_three_comparisons(tmp_path, compose):
    """The README sweep (3 comparisons): each interval in auto.json is the planned rule's at
    alpha / 6 (3 comparisons x speed and accuracy: Rounds.alpha_each; recomputed here from the
    runs' rates; at alpha it would be narrower), and over
    MC_N A/A sweeps of its three set-ups under the rule the sweep builds, any of the three
    comparisons claims a difference in at most (1 - RESERVE) x alpha of them: the family's error
    rate is sweep.alpha, not alpha per comparison (without the split it is ~10 %)."""
    _auto_sweep(tmp_path, lambda o: 1.0, *README_SWEEP, sd=0.05)
    saved = json.loads((tmp_path / "auto.json").read_text())
    assert saved["alpha"] == ALPHA and len(saved["comparisons"]) == 3
    rates = {}
    for f in (tmp_path / "sweep_jobs").glob("*.json"):
        num = int(f.stem)
        rate = json.loads((tmp_path / str(num) / "result.json").read_text())["perf/examples_per_sec"]
        rates.setdefault(num % 3, {})[num // 3] = rate
    for rec in saved["comparisons"]:
        a, b = ([rates[i].get(r) for r in range(rec["rounds"])] for i in (rec["a"], rec["b"]))
        each = seq.outcome(a, b, 0.05, seq.planned(ALPHA / 6, 10))
        whole = seq.outcome(a, b, 0.05, seq.planned(ALPHA, 10))
        assert rec["rounds"] >= 3 and rec["outcome"] == "not settled"
        assert (rec["low"], rec["high"]) == (pytest.approx(each.low, rel=1e-9),
                                             pytest.approx(each.high, rel=1e-9))
        assert whole.high / whole.low < 0.97 * each.high / each.low
    jobs = [["strategy=one_device", *README_SWEEP[1:]], ["strategy=mirrored", *README_SWEEP[1:]],
            ["strategy=one_device", *README_SWEEP[1:], "global_batch_size=128"]]
    rounds = _sweep_rounds(compose, jobs, 10, controls=[2])
    assert len(rounds.pairs) == 3 and rounds.alpha_each == ALPHA / 6  # 3 x speed and accuracy
    logs = seqs.log_rates(9, MC_N, 10, sd=0.15, setups=3)
    claimed = [seqs.first_settled(logs[:, c.a] - logs[:, c.b], rounds.rule)[0] for c in rounds.pairs]
    family = seqs.wrong(sum(abs(k) == 1 for k in claimed))  # FASTER or SLOWER: +-1
    # the speed halves spend about half the plan (the accuracy halves the other half:
    # test_a_a_on_both_halves_holds_alpha_over_the_whole_sweep): spent, not wasted
    half = (1 - seq.RESERVE) * ALPHA / 2
    assert 0.7 * half < family <= half + 3 * seqs.se(half, MC_N), family


@pytest.mark.parametrize("args,line", [
    (["repeats=auto", "sweep.alpha=1.5"], "sweep.alpha: received 1.5; expected 0 < x < 1"),
    (["repeats=auto", "sweep.max_repeats=1"], "sweep.max_repeats: received 1; expected >= 2"),
    (["repeats=twice"], "repeats: received 'twice'; valid: auto or an integer >= 1"),
])
def test_bad_auto_keys_one_line(args, line):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf, open_dict

    from distexp.config import checks
    from helpers.cli import CONF

    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
            cfg = compose(config_name="config", overrides=args)
    finally:
        GlobalHydra.instance().clear()
    with open_dict(cfg):
        cfg.pop("hydra", None)
    with pytest.raises(UserError) as ex:
        checks.validate(OmegaConf.create(OmegaConf.to_container(cfg)))
    assert line in str(ex.value)


def test_other_sweepers_refuse_auto_in_one_line():
    from omegaconf import OmegaConf

    from distexp.sweeps.callback import _check_sweeper

    for target in ("hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper",
                   "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"):
        cfg = OmegaConf.create({"hydra": {"sweeper": {"_target_": target}}, "repeats": "auto"})
        with pytest.raises(UserError) as ex:
            _check_sweeper(cfg)
        name = target.rsplit(".", 1)[-1]
        assert str(ex.value).startswith(f"repeats: received auto with the {name}; ")
        assert "\n" not in str(ex.value)


def test_comparisons_and_names():
    from distexp.sweeps import auto
    from distexp.sweeps.planning import Setup

    one = Setup(1, 64, (("model", "mlp"),))
    mir = Setup(2, 128, (("model", "mlp"), ("strategy.name", "mirrored")))
    ctl = Setup(1, 128, (("model", "mlp"),))
    got = [(c.a, c.b, c.kind) for c in auto.comparisons([one, mir, ctl])]
    assert got == [(1, 2, auto.EQUAL_WORK), (1, 0, auto.BASELINE), (2, 0, auto.BASELINE)]
    assert auto.comparisons([one]) == []
    assert seq.OPEN == "not settled"


def _decision(outcome="not settled"):
    from distexp.figures import outcomes as O

    names = ["one_device x1 batch 64", "mirrored x2", "one_device x1 batch 128 (control)"]
    recs = [O.Record(1, 2, [names[1], names[2]], O.EQUAL_WORK, 0.72, 0.45, 1.14, outcome, 10,
                     "repeated confidence intervals", 0.31, 14),
            O.Record(1, 0, [names[1], names[0]], O.BASELINE, 1.18, 0.81, 1.72, "not settled", 10,
                     "repeated confidence intervals", 0.30, None),
            O.Record(2, 0, [names[2], names[0]], O.BASELINE, 1.61, 1.32, 1.96, "faster", 6,
                     "repeated confidence intervals", 0.12, None)]
    return O.Decision("auto", "repeated confidence intervals", 0.05, 0.05, 10, 10, names, recs,
                      "python -m distexp -m a=1,2 sweep.resume=X sweep.max_repeats=14", 14, [2])


def test_every_text_is_rendered_from_the_records():
    """The round line, the closing lines, the description's first line: one record each, the
    same numbers, the equal-work comparison first; within 120 columns; the JSON round-trips."""
    from distexp.figures import outcomes as O

    d = _decision()
    assert O.from_json(d.to_json()) == d
    assert O.from_json("mirrored x2 vs ...") is None  # an older sweep's text: no decision
    assert O.round_line(d) == ("round 10: mirrored x2 vs control: 0.72x open; mirrored x2 "
                               "vs baseline: 1.18x open; control vs baseline: 1.61x faster")
    assert O.closing_lines(d) == [
        "repeats=auto: 10 of at most 10 rounds, repeated confidence intervals, alpha 0.05 over 3 "
        "comparisons, margin +-5%",
        "mirrored x2 vs one_device x1 batch 128 (control), equal work: 0.72x [0.45, 1.14] not "
        "settled after 10 rounds",
        "mirrored x2 vs one_device x1 batch 64, baseline: 1.18x [0.81, 1.72] not settled after 10 "
        "rounds",
        "one_device x1 batch 128 (control) vs one_device x1 batch 64, baseline: 1.61x [1.32, 1.96] "
        "faster",
        "Not settled: the noise is 0.31 (sd of the paired log ratios, 36% a round); likely "
        "settled after ~14 rounds (0.72x)",
        "Continue:",  # the command on a line of its own (cut between words where it is long)
        "  python -m distexp -m a=1,2 sweep.resume=X sweep.max_repeats=14"]
    assert O.description_line(d) == ("Outcome: mirrored x2 vs its control: 0.72x [0.45, 1.14] not "
                                     "settled (10 rounds; +2 more below)")
    assert O.cell(d.of(1, O.EQUAL_WORK), d.margin) == "0.72x [0.45, 1.14] not settled"
    assert all(len(x) <= 120 for x in [O.round_line(d), O.description_line(d)])
    settled = _decision("slower")
    settled.comparisons[1].outcome = "equal"
    assert O.round_line(settled) == ("round 10: mirrored x2 vs control: 0.72x slower; "
                                     "mirrored x2 vs baseline: 1.18x equal; control vs baseline: "
                                     "1.61x faster")


def test_repeats_n_ends_with_the_same_comparisons_fixed_sample(tmp_path, capsys):
    """repeats=3: the same comparisons, made by the same code, one fixed-sample look after the 3
    rounds, stored as the same records (auto.json), said to be fixed-sample."""
    from distexp.figures import outcomes

    _auto_sweep(tmp_path, _mirrored_faster, "strategy=one_device,mirrored", "cpu_replicas=2",
                "sweep.controls=true", "repeats=3")
    d = outcomes.from_json((tmp_path / "auto.json").read_text())
    assert d.repeats == "3" and d.fixed and d.rounds == 3 and d.method == "fixed-sample paired t"
    work = d.of(1, outcomes.EQUAL_WORK)
    assert work.names == ["mirrored x2", "one_device x1 batch 128 (control)"]
    assert work.rounds == 3 and 1.1 < work.ratio < 1.5 and work.low < work.ratio < work.high
    assert outcomes.heading(d).startswith("repeats=3: 3 rounds, fixed-sample (paired t)")
    assert outcomes.section_lines(d)[0] == "Outcome (repeats=3, fixed-sample)"
    assert "Continue" not in "\n".join(outcomes.closing_lines(d))
    # each comparison says it too, on every surface (text, the UI's and the table's cell)
    said = f"{outcomes.interval(work)} {work.outcome}"
    if work.outcome == outcomes.OPEN_WORD:
        assert f"{said} after 3 rounds (fixed-sample)" in outcomes.text(work, d.margin, 0.5)
    else:
        assert f"{said} (fixed-sample, 3 rounds)" in outcomes.text(work, d.margin, 0.5)
    assert outcomes.cell(work, d.margin, 0.5).startswith(f"{said} (fixed-sample, 3 rounds)")


def test_not_settled_says_what_next():
    """The noise, the rounds that would likely settle each open comparison, the command to the
    fewest of them; past the cap (5x the planned rounds) no command (quiet the machine); no
    difference visible: say
    so; repeats=N: run again with more repeats."""
    from distexp.figures import outcomes as O

    d = _decision()
    d.next_rounds, d.comparisons[0].rounds_needed = None, 792
    assert O.next_lines(d)[1].startswith("More than 50 rounds (the cap: 5x the planned 10): "
                                         "quiet the machine")
    d.comparisons[0].rounds_needed = None
    assert O.next_lines(d)[0].endswith("no difference visible at this noise: more rounds would "
                                       "likely not settle it")
    fixed = _decision()
    fixed.repeats = "3"
    assert O.next_lines(fixed) == ["Not settled: the noise is 0.31 (sd of the paired log ratios, "
                                   "36% a round); likely settled after ~14 rounds (0.72x): run "
                                   "it again with repeats=14"]


def _readme(overrides):
    """The README sweep as measured here: mirrored x2 0.63x its equal-work control, the control
    (batch 128) 1.65x one_device at batch 64, so mirrored x2 vs the baseline is ~1.04x: at the
    +-5 % margin, where no number of rounds settles it."""
    if "strategy=mirrored" in overrides:
        return 1.65 * 0.63
    return 1.65 if "global_batch_size=128" in overrides else 1.0


README = ("strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true", "repeats=auto")


def test_the_sweep_stops_when_its_question_is_answered(tmp_path, capsys):
    """The equal-work comparison is the question (primary): the sweep stops at the round it
    settles, though mirrored x2 vs the baseline (~1.04x, the bigger batch mixed in) is not settled;
    that one is reported as it stands, not the headline, and no Continue is offered for it."""
    from distexp.figures import outcomes

    _auto_sweep(tmp_path, _readme, *README, "sweep.max_repeats=20", sd=0.06)
    out = capsys.readouterr().out
    d = outcomes.from_json((tmp_path / "auto.json").read_text())
    work, base = d.of(1, outcomes.EQUAL_WORK), d.of(1, outcomes.BASELINE)
    assert [r.primary for r in d.comparisons] == [True, False, False]
    assert work.outcome == "slower" and 0.55 < work.ratio < 0.72
    assert d.rounds == work.rounds < 20  # stopped at the round the question settled
    assert base.outcome == "not settled" and base.rounds_needed is None
    assert d.next_command is None and d.next_rounds is None and "Continue:" not in out
    closing = outcomes.closing_lines(d)
    assert closing[1] == "  margins +-5% (speed), +-0.5 pt (accuracy)"  # the heading's rest
    assert closing[2].startswith("mirrored x2 vs one_device x1 batch 128 (control), equal work: ")
    assert closing[3].startswith("as it stands: mirrored x2 vs one_device x1 batch 64, baseline: ")
    assert closing[3].endswith(f"not settled after {d.rounds} rounds")
    assert len(closing) == 5  # nothing next: the question is answered


def test_continue_only_for_the_question_within_the_cap():
    """Not settled: Continue is offered for a primary comparison with the rounds its own rule
    expects to settle it, and only up to CONTINUE_CAP x the planned rounds (50 at 10); an open
    comparison that is not the question gets no rounds and no command."""
    from distexp.figures import outcomes
    from distexp.sweeps import auto
    from distexp.sweeps.planning import Setup

    rounds = auto.Rounds([], lambda o: None, 0.05, 0.05, 10)
    setups = [Setup(1, 64, (("m", "a"),)), Setup(2, 128, (("m", "a"), ("strategy.name", "m"))),
              Setup(1, 128, (("m", "a"),))]
    rounds.pairs = auto.comparisons(setups, controls=[2])
    rounds.jobs, rounds.names = [["a"], ["b"], ["c"]], ["one", "mirrored x2", "control"]
    rounds.alpha_each = 0.05 / 3
    rounds.rule = seq.planned(rounds.alpha_each, 10)
    rounds.rates, rounds.windows, rounds.nums = [[], [], []], [[], [], []], [[], [], []]
    rounds.accuracies, rounds.times = [[], [], []], [[], [], []]
    noise = [0.9, 1.1, 0.95, 1.05, 1.0, 0.92, 1.08, 0.97, 1.03, 1.0]
    for n in noise:  # mirrored 0.9x its control (log noise ~0.12), 1.17x the baseline (~0.24)
        rounds.record({0: 100.0 * (2 - n) / n ** 2, 1: 117.0 * n * n * (2 - n),
                       2: 130.0 * (2 - n)})
    d = rounds.decision(lambda n: f"... sweep.max_repeats={n}")
    work, base = d.of(1, "equal work"), d.of(1, "baseline")
    assert work.primary and not base.primary
    assert work.outcome == base.outcome == "not settled" and base.rounds_needed is None
    assert work.rounds_needed == d.next_rounds == 30  # its rule: ~30 rounds at this noise
    assert d.next_command == "... sweep.max_repeats=30"
    rounds.horizon = 5  # the cap is 5 x 5 = 25 rounds now: under the 30 it needs
    d = rounds.decision(lambda n: f"... sweep.max_repeats={n}")
    assert d.next_command is None and d.next_rounds is None
    assert outcomes.next_lines(d)[1].startswith("More than 25 rounds (the cap: 5x the planned 5)")


def test_continue_keeps_every_override_hydras_included():
    """The command that continues a sweep: the task's overrides and Hydra's own (a launcher,
    its options), not hydra.mode (Hydra adds it for -m) nor hydra.sweep.dir (a folder of its
    own), sweep.resume and sweep.max_repeats replaced."""
    from omegaconf import OmegaConf

    from distexp.sweeps import sweep

    cfg = OmegaConf.create({"hydra": {"overrides": {
        "hydra": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.mode=MULTIRUN",
                  "hydra.sweep.dir=first"],
        "task": ["strategy=one_device,mirrored", "repeats=auto", "sweep.max_repeats=10",
                 "sweep.resume=old"]}}})
    assert sweep.continue_command(cfg, "S1", 24) == (
        "python -m distexp -m hydra/launcher=joblib hydra.launcher.n_jobs=2 "
        "strategy=one_device,mirrored repeats=auto sweep.resume=S1 sweep.max_repeats=24")


MIRRORED_FASTER = ("strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true",
                   "repeats=auto", "sweep.max_repeats=10")


def test_a_starved_run_is_caught_and_the_verdict_does_not_move(tmp_path, capsys):
    """Job 10 (mirrored x2, round 4) starved by a competing process: a quarter of its rate, CPU/wall
    0.40 against its set-up's 1.25. It is flagged in its line, left out of the pairs and its
    round runs again; the verdict is the undisturbed sweep's (paired, that one run would pull the
    ratio down by ~25 % and the comparison open)."""
    from distexp.figures import outcomes

    _auto_sweep(tmp_path / "clean", _mirrored_faster, *MIRRORED_FASTER, sd=0.08)
    clean = outcomes.from_json((tmp_path / "clean" / "auto.json").read_text())
    capsys.readouterr()
    launched = _auto_sweep(tmp_path / "starved", _mirrored_faster, *MIRRORED_FASTER, sd=0.08,
                           starve={10: (0.25, 0.40, None)})
    out = capsys.readouterr().out
    d = outcomes.from_json((tmp_path / "starved" / "auto.json").read_text())
    said = ("round 4: mirrored x2 (job 10) disturbed (CPU/wall 0.40, under 0.6x its set-up's "
            "median 1.25): left out of the pairs; round 4 runs again")
    assert said in out.replace("\n  ", " ").splitlines()  # cut at 120 columns
    assert d.disturbed == [{"setup": 1, "name": "mirrored x2", "slot": 3, "round": 4, "job": 10,
                            "reason": "CPU/wall 0.40, under 0.6x its set-up's median 1.25"}]
    assert [o[-2] for n, o in launched if n in (12, 13, 14)] == ["repeat=4"] * 3  # the re-run
    work, before = d.of(1, outcomes.EQUAL_WORK), clean.of(1, outcomes.EQUAL_WORK)
    assert work.outcome == before.outcome == "faster"
    # the two sweeps' own noise (sd 0.08 a run, ~5 rounds each) apart; the starved run kept would
    # move the mean log ratio by log(4) / 5 = 0.28
    assert abs(math.log(work.ratio / before.ratio)) < 0.15
    assert outcomes.disturbed_line(d) in outcomes.closing_lines(d)
    assert outcomes.disturbed_line(d) == (
        "Disturbed, left out of the pairs: mirrored x2 round 4 (job 10: CPU/wall 0.40, under 0.6x "
        "its set-up's median 1.25)")


def test_a_run_disturbed_twice_is_left_out_not_rerun_again(tmp_path, capsys):
    """The job's own `disturbed` (its window under the floor, result.json) flags it from round
    1 on, before its set-up has runs to compare with; its round runs once more, and disturbed
    again there it is left out of the pairs: round 2 comes next, no second re-run."""
    from distexp.figures import outcomes

    why = "CPU/wall 0.50 under the floor 0.8"
    launched = _auto_sweep(tmp_path, _mirrored_faster, *MIRRORED_FASTER, sd=0.08,
                           starve={1: (0.25, 0.5, why), 4: (0.25, 0.5, why)})
    lines = capsys.readouterr().out.splitlines()
    assert ("round 1: mirrored x2 (job 1) disturbed (CPU/wall 0.50 under the floor 0.8): left "
            "out of the pairs; round 1 runs again") in lines
    assert ("round 1: mirrored x2 (job 4) disturbed (CPU/wall 0.50 under the floor 0.8) again: "
            "left out of the pairs") in lines
    assert not any("runs again" in ln for ln in lines if "(job 4)" in ln)
    d = outcomes.from_json((tmp_path / "auto.json").read_text())
    assert [(f["job"], f["round"]) for f in d.disturbed] == [(1, 1), (4, 1)]
    assert [n for n, _ in launched][6:9] == [8, 6, 7]  # the next round: round 2, as job 6-8
    assert d.of(1, outcomes.EQUAL_WORK).rounds == d.rounds - 1  # round 1 has no pair


def test_repeats_n_leaves_a_disturbed_run_out(tmp_path, capsys):
    """repeats=3: no re-run (the rounds are fixed), the disturbed run is flagged and left out."""
    from distexp.figures import outcomes

    _auto_sweep(tmp_path, _mirrored_faster, "strategy=one_device,mirrored", "cpu_replicas=2",
                "sweep.controls=true", "repeats=3", starve={4: (0.25, 0.5, "starved")})
    assert "round 2: mirrored x2 (job 4) disturbed (starved): left out of the pairs" in \
        capsys.readouterr().out.splitlines()
    d = outcomes.from_json((tmp_path / "auto.json").read_text())
    assert d.of(1, outcomes.EQUAL_WORK).rounds == 2 and d.rounds == 3


def test_result_json_read_defensively(tmp_path):
    """A job before the window keys (no cpu_seconds_timed / timed_seconds / disturbed): not
    flagged; a replayed run: the reason its run was tagged with."""
    from distexp.sweeps import job_figures

    (tmp_path / "result.json").write_text(json.dumps({"perf/examples_per_sec": 10.0}))
    assert job_figures.window_of({"job_dir": str(tmp_path)}) == (None, None)
    (tmp_path / "result.json").write_text(json.dumps(
        {"cpu_seconds_timed": 0.6, "timed_seconds": 1.5, "disturbed": None}))
    assert job_figures.window_of({"job_dir": str(tmp_path)}) == (pytest.approx(0.4), None)
    (tmp_path / "result.json").write_text(json.dumps({"cpu_seconds_timed": "x", "timed_seconds": 0}))
    assert job_figures.window_of({"job_dir": str(tmp_path)}) == (None, None)
    assert job_figures.window_of({"job_dir": str(tmp_path / "gone"), "disturbed": "tagged"}) == \
        (None, "tagged")


def test_a_disturbed_run_is_tagged_through_the_sweeps_client(tmp_path):
    """Through the client of the open sweep the loop is handed (distexp.sweeps.sweep.Sweep.run)."""
    from types import SimpleNamespace

    from distexp.sweeps import sweep
    from distexp.sweeps.ending import OpenSweep
    from distexp.tracking import tags

    calls = []

    class Client:
        def search_runs(self, ids, query, max_results):
            calls.append((ids, query))
            return [SimpleNamespace(info=SimpleNamespace(run_id="R10"))]

        def set_tag(self, run_id, key, value):
            calls.append((run_id, key, value))

    run = SimpleNamespace(client=Client(), experiment_id="E", offline=None)
    sweep.tag_disturbed(OpenSweep(tmp_path, "S", run), [{"job": 10, "reason": "CPU/wall 0.40"}])
    assert tags.DISTURBED == "distexp.disturbed"
    assert calls == [(["E"], "tags.`distexp.sweep_id` = 'S' and tags.`distexp.job_num` = '10' "
                             "and tags.`distexp.run_kind` = 'job'"),
                     ("R10", "distexp.disturbed", "CPU/wall 0.40")]


def test_a_resumed_sweep_measures_an_interrupted_job_again(tmp_path, capsys, monkeypatch):
    """sweep.resume of an auto sweep whose round-1 mirrored job was KILLED (interrupted, its
    training maybe done): the job runs again from the start under its number, without
    resume=true (a resumed training would have nothing to time: 'examples/s not measured'), said
    in one line; the finished runs are replayed, and no round loses its pair."""
    from hydra.core.global_hydra import GlobalHydra

    from distexp.figures import outcomes
    from distexp.sweeps import planning, sweep
    from distexp.tracking.sink import clip

    args = [*MIRRORED_FASTER[:-1], "sweep.max_repeats=3"]
    first = _auto_sweep(tmp_path / "first", _mirrored_faster, *args, sd=0.08)
    try:
        sweeper = _sweeper(tmp_path / "first", *(a for a in args if "," not in a))
        loader = sweeper.hydra_context.config_loader
        runs = []
        for num, overrides in first:
            ident = planning.identity(type(loader).load_sweep_config(loader, sweeper.config,
                                                                     overrides))
            job_dir = tmp_path / "first" / str(num)
            rate = json.loads((job_dir / "result.json").read_text())["perf/examples_per_sec"]
            runs.append({"run_id": f"r{num}", "num": num, "job_dir": str(job_dir),
                         "status": "KILLED" if num == 1 else "FINISHED",
                         "params": {k: clip(v) for k, v in ident.items()},
                         "metrics": {"perf/examples_per_sec": rate}, "tags": {}})
    finally:
        GlobalHydra.instance().clear()
    monkeypatch.setattr(sweep, "resume_runs", lambda config: runs)
    monkeypatch.setattr(sweep, "planned_horizon", lambda config: None)
    capsys.readouterr()
    again = _auto_sweep(tmp_path / "again", _mirrored_faster, *args, "sweep.resume=S", sd=0.08)
    out = capsys.readouterr().out.splitlines()
    assert again[0] == (1, ["strategy=mirrored", "cpu_replicas=2", "sweep.controls=True",
                            "repeats=auto", "sweep.max_repeats=3", "sweep.resume=S", "repeat=0",
                            "seed=0"])
    assert not any("resume=true" in o for _, o in again)
    assert ("Resuming sweep S: round 1, mirrored x2 (job 1) did not finish there: it runs again "
            "from the start as job 1 (a measurement: its checkpoint not used)") in out
    assert [n for n, _ in again] == [1]  # the other runs replayed, none again
    before = outcomes.from_json((tmp_path / "first" / "auto.json").read_text())
    d = outcomes.from_json((tmp_path / "again" / "auto.json").read_text())
    assert d.rounds == before.rounds == d.of(1, outcomes.EQUAL_WORK).rounds  # every round paired


def test_a_measuring_sweep_reruns_an_unfinished_job_from_the_start():
    """planning.place: a user's sweep (repeats=1) re-runs a FAILED/KILLED job from its
    checkpoint (resume=true); a measuring one (repeats=auto, repeats=N >= 2) from the start."""
    from omegaconf import OmegaConf

    from distexp.sweeps import planning

    cfg = OmegaConf.create({"seed": 1})
    run = {"run_id": "r", "num": 4, "status": "KILLED", "params": {"seed": "1"},
           "job_dir": "/x", "metrics": {}, "tags": {}}
    job = ["seed=1"]
    assert planning.place(job, cfg, [run], set()) == ("rerun", 4, ["seed=1", "resume=true"])
    assert planning.place(job, cfg, [run], set(), measure=True) == ("rerun", 4, ["seed=1"])


def test_a_a_on_both_halves_holds_alpha_over_the_whole_sweep(compose):
    """The README sweep's three comparisons, each on speed (the run-noise model) and on accuracy
    (seed noise seqs.SEED_SD points a run, measured on this machine), A/A: over MC_N simulated
    sweeps under the rule the sweep builds (alpha / 6 each), any of the six halves claims a
    difference in at most (1 - RESERVE) x alpha of them; without the split over both halves
    (alpha / 3 each) the family spends more than alpha."""
    jobs = [["strategy=one_device", *README_SWEEP[1:]], ["strategy=mirrored", *README_SWEEP[1:]],
            ["strategy=one_device", *README_SWEEP[1:], "global_batch_size=128"]]
    rounds = _sweep_rounds(compose, jobs, 10, controls=[2])
    assert rounds.alpha_each == ALPHA / 6
    logs = seqs.log_rates(12, MC_N, 10, sd=0.15, setups=3)
    acc = seqs.accuracies(13, MC_N, 10, setups=3)

    def family(rule):
        claimed = [seqs.first_settled(logs[:, c.a] - logs[:, c.b], rule)[0] for c in rounds.pairs]
        claimed += [seqs.first_settled(acc[:, c.a] - acc[:, c.b], rule, rounds.accuracy_margin,
                                       additive=True)[0] for c in rounds.pairs]
        return seqs.wrong(sum(abs(k) == 1 for k in claimed))

    assert family(rounds.rule) <= _planned_bound(), family(rounds.rule)
    assert family(seq.planned(ALPHA / 3, 10)) > _planned_bound()


def _batch_speed(overrides):
    """batch 256 per replica 1.8x as many examples/s as batch 32."""
    return 1.8 if "batch_size_per_replica=256" in overrides else 1.0


def _batch_accuracy(overrides):
    """batch 256 at equal epochs: 3 points less accurate (fewer, larger steps)."""
    return 92.0 if "batch_size_per_replica=256" in overrides else 95.0


def test_a_faster_but_less_accurate_set_up_is_said_so_everywhere(tmp_path, capsys):
    """batch 32 vs 256 (different mathematics): the sweep stays open until the accuracy half is
    settled too, then ends "faster ...; less accurate by ...: faster, but less accurate", the
    same in the closing lines (within 120 columns), the parent's description and the UI's cell,
    all rendered from the records; the accuracy interval is sequential.difference's on the
    runs' accuracies at the rule's alpha / 2."""
    from distexp.figures import outcomes

    _auto_sweep(tmp_path, _batch_speed, "batch_size_per_replica=32,256", "repeats=auto",
                "sweep.max_repeats=10", accuracy=_batch_accuracy)
    out = capsys.readouterr().out.splitlines()
    d = outcomes.from_json((tmp_path / "auto.json").read_text())
    (rec,) = d.comparisons
    assert not rec.same_maths and rec.outcome == "faster" and rec.accuracy_outcome == "less accurate"
    acc = {}
    for f in (tmp_path / "sweep_jobs").glob("*.json"):
        num = int(f.stem)
        got = json.loads((tmp_path / str(num) / "result.json").read_text())["eval/accuracy"]
        acc.setdefault(num % 2, {})[num // 2] = 100 * got
    a, b = ([acc[i][r] for r in range(d.rounds)] for i in (1, 0))
    want = seq.difference(a, b, 0.5, seq.planned(ALPHA / 2, 10))
    assert (rec.accuracy, rec.accuracy_low, rec.accuracy_high) == (
        pytest.approx(want.diff), pytest.approx(want.low), pytest.approx(want.high))
    assert rec.accuracy_rounds == d.rounds  # the sweep ran until the accuracy half settled
    said = (f"mirrored x1 batch 256 vs mirrored x1 batch 32, baseline: {outcomes.interval(rec)} "
            f"faster; accuracy {rec.accuracy:+.1f} pt [{rec.accuracy_low:.1f}, "
            f"{rec.accuracy_high:.1f}], less accurate by {-rec.accuracy:.1f} pt: faster, but less "
            "accurate")
    closing = outcomes.closing_lines(d)
    # over 120 columns: cut before its accuracy half, the second line indented
    head, tail = said.split("; accuracy ")
    assert closing[2:4] == [head + ";", "  accuracy " + tail]
    assert all(len(x) <= 120 for x in closing)
    section = outcomes.section_lines(d)  # the report's: bullets, a wrapped line goes on under it
    assert section[3:5] == ["- " + head + ";", "    accuracy " + tail]
    assert all(len(x) <= 120 for x in section)
    # the round lines: the accuracy half open until the last round
    rounds = [x for x in out if x.startswith("round ")]
    assert rounds[-2].endswith(", accuracy " + rounds[-2].rsplit(", accuracy ", 1)[1])
    assert rounds[-2].endswith(" open") and rounds[-1].endswith(" less accurate")
    assert closing[0].endswith(", alpha 0.05 over 1 comparison x 2 halves,")
    assert closing[1] == "  margins +-5% (speed), +-0.5 pt (accuracy)"
    assert outcomes.description_line(d).startswith(
        f"Outcome: mirrored x1 batch 256 vs mirrored x1 batch 32: {outcomes.interval(rec)} faster; "
        f"accuracy {rec.accuracy:+.1f} pt")
    assert outcomes.setup_answer(d, 1).endswith("less accurate by "
                                                f"{-rec.accuracy:.1f} pt: faster, but less accurate")


def test_same_mathematics_reports_accuracy_as_it_stands_and_does_not_lengthen_the_sweep(
        tmp_path, capsys):
    """The README sweep with accuracies (every set-up the same mean): the equal-work comparison
    (mirrored x2 vs its control: same global batch, same training) is same mathematics, and the
    sweep stops at the round it stops without accuracies; its accuracy reported as it stands."""
    plain = _auto_sweep(tmp_path / "plain", _mirrored_faster, *README_SWEEP)
    both = _auto_sweep(tmp_path / "both", _mirrored_faster, *README_SWEEP,
                       accuracy=lambda o: 95.0)
    assert max(n for n, _ in both) // 3 == max(n for n, _ in plain) // 3  # the same rounds
    from distexp.figures import outcomes

    d = outcomes.from_json((tmp_path / "both" / "auto.json").read_text())
    work, base = d.of(1, outcomes.EQUAL_WORK), d.of(1, outcomes.BASELINE)
    assert work.same_maths and not base.same_maths and work.accuracy_rounds == d.rounds
    if work.accuracy_outcome == "not settled":
        assert outcomes.accuracy_text(work, 0.5).endswith(", as it stands (same training)")
