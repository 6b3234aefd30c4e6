"""repeats=auto through the real sweeper (no TensorFlow, nothing trained): a launcher that writes
each job's record and result.json with a rate from a seeded model of the set-ups, the rounds the
sweep runs, which set-ups leave, the one line per round, the outcomes; and the refusals."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from helpers import sweeper as _sweeper
from distexp.errors import UserError
from distexp.figures import sequential as seq


class RateLauncher:
    """Writes what the callback and the trainer would: sweep_jobs/<num>.json and result.json."""

    def __init__(self, sweep_dir: Path, speed, sd=0.03, seed=0):
        self.sweep_dir, self.speed, self.sd = sweep_dir, speed, sd
        self.rng = random.Random(seed)
        self.launched = []

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
            (job_dir / "result.json").write_text(json.dumps({"perf/examples_per_sec": rate}))
            (self.sweep_dir / "sweep_jobs").mkdir(exist_ok=True)
            (self.sweep_dir / "sweep_jobs" / f"{num}.json").write_text(json.dumps(
                {"num": num, "overrides": overrides, "status": "COMPLETED", "value": 0.9,
                 "error": None, "job_dir": str(job_dir)}))
            ret = JobReturn(overrides=list(overrides), _return_value=0.9)
            ret.status = JobStatus.COMPLETED
            out.append(ret)
        return out


def _auto_sweep(tmp_path, speed, *args, sd=0.03):
    from hydra.core.global_hydra import GlobalHydra

    try:
        sweeper = _sweeper(tmp_path, *(a for a in args if "," not in a))
        sweeper.launcher = RateLauncher(tmp_path, speed, sd)
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
    assert len(lines) >= 2 and lines[0].startswith("round 1: mirrored x2 batch 128 vs one_device "
                                                   "x1 batch 128 (equal work): ")
    # three set-ups in round 0, numbered as repeats=N numbers them (round x 3 + set-up)
    assert [n for n, _ in launched[:3]] == [0, 1, 2]
    assert all(o[-1] == f"repeat={n // 3}" for n, o in launched)
    saved = json.loads((tmp_path / "auto.json").read_text())["outcomes"]
    assert saved[0].startswith(f"repeats=auto: {len(lines)} round(s), alpha 0.05 over 3 "
                               "comparison(s) (Bonferroni)")
    equal_work = next(s for s in saved if "(equal work)" in s)
    assert equal_work.endswith("faster")  # 1.3x at 3 % noise: settled within 10 rounds
    assert "open" not in lines[-1] and len(lines) < 10  # every comparison settled: stop
    # the last round ran only what was still open
    last = [o for n, o in launched if n // 3 == len(lines) - 1]
    assert 0 < len(last) <= 3


def test_a_a_pair_is_never_faster_or_slower(tmp_path, capsys):
    _auto_sweep(tmp_path, lambda o: 1.0, "seed=0,1", "repeats=auto", "sweep.max_repeats=4", sd=0.05)
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "auto.json").read_text())["outcomes"]
    assert len(saved) == 2 and "(baseline)" in saved[1]
    assert saved[1].endswith(("not settled after 4 rounds", "equal within +-5%"))
    assert out.count("\nround ") + out.startswith("round ") == 4


@pytest.mark.parametrize("args,line", [
    (["repeats=auto", "sweep.alpha=1.5"], "sweep.alpha: received 1.5; expected 0 < x < 1"),
    (["repeats=auto", "sweep.max_repeats=1"], "sweep.max_repeats: received 1; expected >= 2"),
    (["repeats=twice"], "repeats: received 'twice'; valid: auto or an integer >= 1"),
])
def test_bad_auto_keys_one_line(args, line):
    from omegaconf import OmegaConf, open_dict

    from distexp.config import checks
    from helpers.cli import CONF
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

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


def test_the_description_line_leads_with_equal_work():
    from distexp.sweeps.summary import LINE_MAX, auto_line

    outcomes = ["repeats=auto: 4 round(s), alpha 0.05 over 3 comparison(s) (Bonferroni), ...",
                "mirrored x2 batch 128 vs one_device x1 batch 64 (baseline): 1.9x [1.5, 2.4] faster",
                "mirrored x2 batch 128 vs one_device x1 batch 128 (equal work): 1.31x [1.12, 1.53] "
                "faster",
                "one_device x1 batch 128 vs one_device x1 batch 64 (baseline): 1.4x [1.2, 1.7] faster"]
    assert auto_line(outcomes) == ("Outcome: mirrored x2 vs one_device x1, equal work (batch "
                                   "128): 1.31x [1.12, 1.53] faster (4 rounds; +2 more below)")
    assert auto_line([]) is None
    assert auto_line(["repeats=auto: 1 round(s), alpha 0.05 ...", "a x2 vs b x1 (baseline): 1.03x "
                      "[0.91, 1.16] not settled after 1 round"]) == (
        "Outcome: a x2 vs b x1 (baseline): 1.03x [0.91, 1.16] not settled (1 round)")
    # short enough to read uncut above MLflow's runs table (LINE_MAX): the comparisons that fit
    # are shown, the rest counted; an open one says its rounds once, at the end
    many = outcomes[:1] + [f"central x{n} batch {64 * n} vs one_device x1 batch {64 * n} "
                           f"(equal work): 1.03x [0.91, 1.16] not settled after 4 rounds"
                           for n in (2, 3, 4)]
    line = auto_line(many)
    assert len(line) <= LINE_MAX and line == (
        "Outcome: central x2 vs one_device x1, equal work (batch 128): 1.03x [0.91, 1.16] not "
        "settled (4 rounds; +2 more below)")
