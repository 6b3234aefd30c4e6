"""A sweep runs each set-up once (distexp.sweeps.planning.merge): jobs that train the same thing
are merged into the first of them, with one line naming them. The real DistexpSweeper on composed
configs, its launcher recording the jobs: no TensorFlow, no process."""
from __future__ import annotations

import pytest

from distexp.errors import UserError
from helpers import launched as _launched


def _merged_line(out: str):
    """The merge's lines: its head and the pairs, one a line (each within 120 columns)."""
    lines = out.splitlines()
    at = [i for i, x in enumerate(lines) if x.startswith("sweep: ")]
    assert len(at) <= 1, out
    if not at:
        return None
    said = [lines[at[0]]] + [x for x in lines[at[0] + 1:] if x.startswith("  [")]
    assert max(map(len, said)) <= 120, said
    return "\n".join(said)


def test_the_readme_sweep_runs_one_device_once(tmp_path, capsys):
    got = _launched(tmp_path, "strategy=one_device,mirrored", "cpu_replicas=1,2", "repeats=2")
    # one_device ignores cpu_replicas: with 2 it is the 1-replica job again; repeats apply to
    # the jobs left, interleaved, round r's with seed 0 + r (sweep.seed_by_round)
    assert got == [["strategy=one_device", "cpu_replicas=1", "repeats=2", "repeat=0", "seed=0"],
                   ["strategy=mirrored", "cpu_replicas=1", "repeats=2", "repeat=0", "seed=0"],
                   ["strategy=mirrored", "cpu_replicas=2", "repeats=2", "repeat=0", "seed=0"],
                   ["strategy=one_device", "cpu_replicas=1", "repeats=2", "repeat=1", "seed=1"],
                   ["strategy=mirrored", "cpu_replicas=1", "repeats=2", "repeat=1", "seed=1"],
                   ["strategy=mirrored", "cpu_replicas=2", "repeats=2", "repeat=1", "seed=1"]]
    assert _merged_line(capsys.readouterr().out) == (
        "sweep: 1 job(s) merged into an earlier job of the same set-up (strategy, replicas, "
        "global batch, model, data, knobs):\n"
        "  [strategy=one_device cpu_replicas=2] -> [strategy=one_device cpu_replicas=1]")


def test_same_facts_from_other_keys_merge(tmp_path, capsys):
    # one replica at global batch 64 with the same learning rate, however it is spelled
    got = _launched(tmp_path, "strategy=one_device", "batch_size_per_replica=32,64",
                    "global_batch_size=64")
    assert got == [["strategy=one_device", "batch_size_per_replica=32", "global_batch_size=64"]]
    # mirrored ignores `workers` (one process); the same job typed twice is one job
    assert len(_launched(tmp_path / "w", "strategy=mirrored", "workers=2,3")) == 1
    assert len(_launched(tmp_path / "s", "seed=0,0")) == 1
    capsys.readouterr()


def test_different_work_is_never_merged(tmp_path, capsys):
    cases = [
        ("seed=0,1",),                                          # the seed changes the work
        ("strategy=one_device,mirrored",),                      # one replica, other strategy
        ("strategy=mirrored", "cpu_replicas=1,2"),              # replicas
        ("strategy=multiworker", "workers=1,2"),                # a count the strategy uses
        ("strategy=ps", "ps=1,2"),                              # the same replicas, more ps
        ("strategy=one_device", "gpus=0", "global_batch_size=32,64"),
        ("epochs=1,2",),
        # the same global batch at another learning rate: linear scaling takes
        # batch_size_per_replica as the reference (x2 at 32, x1 at 64)
        ("strategy=one_device", "learning_rate_scaling=linear", "global_batch_size=64",
         "batch_size_per_replica=32,64"),
    ]
    for i, case in enumerate(cases):
        assert len(_launched(tmp_path / str(i), *case)) == 2, case
        assert _merged_line(capsys.readouterr().out) is None, case
    # cpu_replicas=0 fails the checks: not merged into the good job (hidden behind it), the
    # sweep refused in its line before any job runs (planning.check_jobs)
    with pytest.raises(UserError, match=r"^cpu_replicas: received 0; expected >= 1$"):
        _launched(tmp_path / "bad", "strategy=one_device", "cpu_replicas=1,0")
    assert _merged_line(capsys.readouterr().out) is None


def test_the_basic_launcher_gets_the_configs_the_sweeper_composed(tmp_path, monkeypatch):
    """Hydra's basic launcher composes every job again (load_sweep_config), ~0.2-0.5 s a job: it is
    handed the sweeper's own composition instead, one per job, and the loader is left as it was."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import JobReturn, JobStatus

    from helpers.fakes import sweeper

    composed = []
    own = ConfigLoaderImpl.load_sweep_config

    def counting(self, master_config, sweep_overrides):
        composed.append(list(sweep_overrides))
        return own(self, master_config, sweep_overrides)

    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", counting)

    class Launcher(BasicLauncher):  # loads each job's config as BasicLauncher.launch does
        seeds = []

        def launch(self, job_overrides, initial_job_idx):
            out = []
            for overrides in job_overrides:
                cfg = self.hydra_context.config_loader.load_sweep_config(self.config,
                                                                         list(overrides))
                self.seeds.append(cfg.seed)
                ret = JobReturn(overrides=list(overrides), _return_value=0.5)
                ret.status = JobStatus.COMPLETED
                out.append(ret)
            return out

    try:
        s = sweeper(tmp_path)
        launcher = Launcher()
        launcher.config, launcher.hydra_context = s.config, s.hydra_context
        s.launcher = launcher
        s.sweep(["seed=0,1,2"])
        loader = s.hydra_context.config_loader
    finally:
        GlobalHydra.instance().clear()
    assert Launcher.seeds == [0, 1, 2]
    assert len(composed) == 3, composed  # once per job, by the sweeper; not again by the launcher
    assert "load_sweep_config" not in vars(loader)  # the class's method again
