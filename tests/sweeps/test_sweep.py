"""distexp.sweeps.sweep.Sweep: each job's config composed and checked once per set-up (not once
per caller: merge, controls, the rounds, the set-up tags and the checks asked for it up to four
times, each check making and removing a directory in checkpoint.dir), and the round loop handed
its open sweep. The real DistexpSweeper on composed configs, its launcher recording the jobs."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers import fakes

pytestmark = pytest.mark.unit

README_SWEEP = ("strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true")


@pytest.fixture
def validations(monkeypatch):
    """The configs distexp.config.checks.validate was called with (their `repeat` and strategy)."""
    from distexp.config import checks

    seen, real = [], checks.validate

    def counted(cfg):
        seen.append((cfg.strategy.name, cfg.get("global_batch_size"), cfg.repeat))
        return real(cfg)

    monkeypatch.setattr(checks, "validate", counted)
    return seen


def test_repeats_n_checks_each_set_up_once(tmp_path, validations):
    """3 set-ups (one_device, mirrored x2, the control) x 3 repeats: 9 jobs launched, each
    round's with its seed (sweep.seed_by_round), 3 checks (there were 20: merge 2, controls 3,
    set-up tags 3, rounds 3, each launch 9)."""
    launched = fakes.launched(tmp_path, *README_SWEEP, "repeats=3")
    assert len(launched) == 9 and [o[-2:] for o in launched] == [
        [f"repeat={n // 3}", f"seed={n // 3}"] for n in range(9)]
    assert sorted(validations, key=str) == sorted([("one_device", None, 0), ("mirrored", None, 0),
                                                   ("one_device", 128, 0)], key=str)


def test_repeats_auto_checks_each_set_up_once_over_all_its_rounds(tmp_path, validations):
    """repeats=auto, 2 rounds (the recording launcher leaves no figures: nothing settles): 6 jobs,
    3 checks (there were 11: merge 2, controls 3, rounds 3, the checks 3)."""
    launched = fakes.launched(tmp_path, *README_SWEEP, "repeats=auto", "sweep.max_repeats=2",
                              preset=("sweep.max_repeats=2",))  # the master config's: the rule's
    assert len(launched) == 6
    assert len(validations) == 3


def test_a_job_that_fails_its_checks_still_refuses_the_sweep_in_its_line(tmp_path, validations):
    """The check's one line, from the set-up's one check: `-m epochs=1,0` (job 2's), nothing
    launched."""
    from distexp.errors import UserError

    with pytest.raises(UserError, match=r"^epochs: received 0"):
        fakes.launched(tmp_path, "epochs=1,0", "repeats=2")
    assert len(validations) == 2


def test_the_round_loop_publishes_on_the_open_sweep_it_is_handed(tmp_path, capsys):
    """repeats=2 of two set-ups: the decision (auto.json) on the parent run of the OpenSweep
    handed to Sweep.run, no process-wide registry asked."""
    import json

    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from distexp.sweeps.ending import OpenSweep
    from distexp.sweeps.sweep import Sweep
    from distexp.tracking import tags

    tagged = {}
    run = SimpleNamespace(offline=None, set_tag=lambda k, v: tagged.__setitem__(k, v))
    try:
        sweeper = fakes.sweeper(tmp_path)
        loader = sweeper.hydra_context.config_loader
        sweep = Sweep(sweeper.config, lambda o: type(loader).load_sweep_config(
            loader, sweeper.config, o))
        parsed = OverridesParser.create(config_loader=loader).parse_overrides(["repeats=2"])
        jobs = [["strategy=one_device", "repeats=2"],
                ["strategy=mirrored", "cpu_replicas=2", "repeats=2"]]
        assert sweep.plan(jobs, parsed) == []
        launches = []
        failure = sweep.run(OpenSweep(tmp_path, "S", run),
                            lambda launch: launches.append(launch) or None)
    finally:
        GlobalHydra.instance().clear()
    assert failure is None and len(launches) == 1  # repeats=N: every round at once
    assert [o[-2:] for _, o in launches[0]] == [["repeat=0", "seed=0"], ["repeat=0", "seed=0"],
                                                ["repeat=1", "seed=1"], ["repeat=1", "seed=1"]]
    saved = json.loads((tmp_path / "auto.json").read_text())
    assert json.loads(tagged[tags.OUTCOMES]) == saved and saved["rounds"] == 2
    assert saved["setups"] == ["one_device x1", "mirrored x2"]
