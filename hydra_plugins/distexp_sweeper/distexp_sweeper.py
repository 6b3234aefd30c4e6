"""distexp's Hydra sweeper: BasicSweeper + `sweep.controls` + `repeats` (interleaved) + `sweep.resume`.

Hydra loads plugin classes only from the `hydra_plugins` package, so the class is here and the
logic is in distexp.sweeps.planning. Selected by distexp's conf (`hydra/sweeper: distexp`, sweeper_default.yaml).
"""
from __future__ import annotations

import contextlib
import copy
import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


def _cached(compose: Callable[[List[str]], Any]) -> Callable[[List[str]], Any]:
    """`compose`, each job's config composed once (a copy each call: callers may edit it)."""
    done: Dict[tuple, Any] = {}

    def cached(overrides: List[str]) -> Any:
        key = tuple(overrides)
        if key not in done:
            done[key] = compose(list(overrides))
        return copy.deepcopy(done[key])

    return cached


@contextlib.contextmanager
def _composed_once(launcher, loader, master, compose):
    """While the jobs launch, Hydra's basic launcher's `load_sweep_config(master, overrides)`
    returns the config this sweeper composed for those overrides (a copy): it would compose each
    job again, ~0.2-0.5 s a job on 2 cores, for the same result. Another master config is composed
    as before; other launchers (joblib pickles the loader to its workers) are left as they are."""
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher

    if not isinstance(launcher, BasicLauncher):
        yield
        return
    own = loader.load_sweep_config

    def load_sweep_config(master_config, sweep_overrides):
        if master_config is master:
            return compose(list(sweep_overrides))
        return own(master_config, sweep_overrides)

    loader.load_sweep_config = load_sweep_config
    try:
        yield
    finally:
        del loader.load_sweep_config  # the class's method again


class DistexpSweeper(BasicSweeper):
    """Hydra's BasicSweeper, each job run `repeats` times round-robin; `sweep.resume` skips
    the jobs that finished in the given sweep and re-runs the failed ones (distexp.sweeps.planning)."""

    def __init__(self, max_batch_size: Optional[int] = None,
                 params: Optional[Dict[str, str]] = None) -> None:
        # BasicSweeper.__init__ calls super(BasicSweeper, self), which breaks when Hydra's plugin
        # scan has re-executed basic_sweeper.py after this class was defined: set up directly.
        Sweeper.__init__(self)
        self.overrides = None
        self.batch_index = 0
        self.max_batch_size = max_batch_size
        self.params = params or {}
        self.hydra_context = self.config = self.launcher = None

    def sweep(self, arguments: List[str]) -> Any:
        """Every check of every job first (nothing is written, no parent run opened, before they
        pass: distexp.sweeps.callback.open_sweep), then the jobs, then the sweep's decision."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from distexp.sweeps import auto, planning, records, setups

        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        # ${now:...} in the sweep dir resolved before any job is composed (Hydra copies the
        # master's resolver cache into each job's config): every job in the one sweep folder
        str(self.config.hydra.sweep.dir)
        params_conf = self._parse_config() + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params_conf)
        jobs = [job for batch in self.split_arguments(overrides, None) for job in batch]
        loader = self.hydra_context.config_loader  # its class's method: see _composed_once
        compose = _cached(lambda o: type(loader).load_sweep_config(loader, self.config, o))
        jobs, merged = planning.merge(jobs, compose)
        lines = [merged] if merged else []
        controls: List[int] = []
        if planning.controls_on(self.config, overrides):
            first = len(jobs)
            jobs, more = planning.with_controls(jobs, compose)
            controls, lines = list(range(first, len(jobs))), lines + more
        repeats = planning.repeats(self.config, overrides)
        if repeats == "auto":
            planning.check_jobs([[*j, "repeat=0"] for j in jobs], compose)
        else:
            order = auto.interleaved(jobs, repeats, compose)  # seeds by round
            launches = planning.plan(order, self.config, compose, measure=repeats >= 2)
            planning.check_jobs([job for _, job in launches.launch], compose)
        sweep_dir = self._open(lines)
        if repeats == "auto":
            return self._auto(jobs, compose, sweep_dir, controls)
        records.write_records(sweep_dir, launches.skipped)
        records.write_plan(sweep_dir, [num for num, _ in launches.launch])
        setups.hand_out(sweep_dir, setups.keys(jobs, compose),  # each run's set-up tags
                        setups.positions(jobs, repeats, launches.launch, order))
        self.overrides = [[job for _, job in launches.launch]]
        self.batch_index = 1
        returns: List[Any] = []
        with _composed_once(self.launcher, self.hydra_context.config_loader, self.config,
                            compose):
            first_failure = self._launch(launches.launch, returns, None)
        self._decide(jobs, compose, repeats, controls, launches, sweep_dir)
        if first_failure is not None:  # as BasicSweeper does, but after every job has run
            # (not via .return_value: it prints the job's overrides, credentials and all)
            raise first_failure._return_value
        return returns

    def _open(self, lines: List[str]) -> Path:
        """The checks passed: open the sweep (its parent run, sweep.json), write multirun.yaml."""
        from distexp.sweeps import callback
        from distexp.tracking.redaction import redact_text

        hooks = getattr(self.hydra_context.callbacks, "callbacks", None) or []
        if any(isinstance(h, callback.SweepCallback) for h in hooks):  # it deferred to here
            callback.probe_store(self.config)
            callback.open_sweep(self.config)
        for line in lines:
            print(line, flush=True)
        sweep_dir = Path(self.config.hydra.sweep.dir).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / "multirun.yaml").write_text(redact_text(OmegaConf.to_yaml(self.config)))
        return sweep_dir

    def _decide(self, jobs, compose, repeats: int, controls, launches, sweep_dir: Path) -> None:
        """repeats=N (N >= 2): the same comparisons as repeats=auto, one fixed-sample look at
        the end (distexp.sweeps.auto.Rounds), published as auto.json and the parent's tag."""
        from distexp.sweeps import auto, records
        from distexp.sweeps.ending import SWEEPS

        if repeats < 2 or len(jobs) < 2:
            return
        rounds = auto.Rounds(jobs, compose, *auto.settings(self.config)[:2], repeats,
                             controls=controls, repeats=repeats, accuracy_margin=auto.
                             accuracy_settings(self.config)["accuracy_margin"])
        where = {tuple(j): p for p, j in enumerate(auto.interleaved(jobs, repeats, compose))}
        rates: dict = {}
        for rec in records.records(sweep_dir):
            p = where.get(tuple(rec.get("overrides") or ()))
            if p is not None:
                got = rates.setdefault(p // len(jobs), ({}, {}, {}, {}, {}))
                i = p % len(jobs)
                got[0][i], got[1][i], got[2][i] = auto.rate_of(rec), auto.window_of(rec), rec["num"]
                got[3][i], got[4][i] = auto.accuracy_of(rec), auto.time_of(rec)
        for r in range(repeats):
            lines = rounds.record(*rates.get(r, ({}, {}, {}, {}, {})))
            for line in lines:
                print(line, flush=True)
        sweep_id = SWEEPS.open.sweep_id if SWEEPS.open is not None else None
        auto.tag_disturbed(sweep_id, rounds.disturbed)
        auto.publish(rounds.decision(), sweep_dir)

    def _launch(self, launch, returns: List[Any], first_failure):
        """Launch (num, overrides) jobs in batches of consecutive numbers; the first failure."""
        from distexp.sweeps import planning

        for first_num, batch in planning.batches(launch, self.max_batch_size):
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=first_num)
            for r in results:
                if first_failure is None and r.status.name != "COMPLETED":
                    first_failure = r
            returns.append(results)
        return first_failure

    def _auto(self, jobs, compose, sweep_dir: Path, controls) -> Any:
        """repeats=auto: rounds until the sweep's question is answered (distexp.sweeps.auto)."""
        from distexp.sweeps import auto
        from distexp.sweeps.ending import SWEEPS

        rounds = auto.Rounds(jobs, compose, *auto.settings(self.config), controls=controls,
                             horizon=auto.planned_horizon(self.config),
                             **auto.accuracy_settings(self.config))
        runs, used = auto.resume_runs(self.config), set()
        sweep_id = SWEEPS.open.sweep_id if SWEEPS.open is not None else None
        returns: List[Any] = []
        first_failure, launched = None, []
        with _composed_once(self.launcher, self.hydra_context.config_loader, self.config,
                            compose):
            while not rounds.finished():
                first_failure = self._round(rounds, compose, sweep_dir, (runs, used), launched,
                                            (returns, first_failure), sweep_id)
        if first_failure is not None:
            raise first_failure._return_value
        return returns

    def _round(self, rounds, compose, sweep_dir: Path, replay, launched, returned, sweep_id):
        """One round of `_auto`: replay what a resumed sweep has (a job interrupted before its
        figures runs again from the start: said in one line), launch the rest, record it."""
        from distexp.figures import outcomes
        from distexp.sweeps import auto, planning, records, setups

        (runs, used), (returns, first_failure) = replay, returned
        launch, index, skipped = [], {}, []
        for num, job in rounds.round_jobs():
            index[num] = num % len(rounds.jobs)
            what, old, got = ("new", None, job) if runs is None else \
                planning.place(job, compose(list(job)), runs, used, measure=True)
            if what == "skip":
                skipped.append({**got, "num": num})
                continue
            if what == "rerun":
                print(f"Resuming sweep {self.config.sweep.resume}: round {rounds.rounds + 1}, "
                      f"{rounds.names[index[num]]} (job {old}) did not finish there: it runs "
                      f"again from the start as job {num} (a measurement: its checkpoint not "
                      "used)", flush=True)
            launch.append((num, got))
        records.write_records(sweep_dir, skipped)
        launched += [num for num, _ in launch]  # the console's "job k of at most N"
        records.write_plan(sweep_dir, launched, at_most=len(launched) + len(launch) * max(
            rounds.max_repeats - rounds.rounds - 1, 0), names={n: rounds.names[i]
                                                                for n, i in index.items()})
        setups.hand_out(sweep_dir, rounds.keys, index)  # each run's set-up tags
        first_failure = self._launch(launch, returns, first_failure)
        done = {int(r["num"]): r for r in records.records(sweep_dir)}
        mine = {i: done.get(num, {}) for num, i in index.items()}
        said = rounds.record({i: auto.rate_of(r) for i, r in mine.items()},
                             {i: auto.window_of(r) for i, r in mine.items()},
                             {i: num for num, i in index.items()},
                             {i: auto.accuracy_of(r) for i, r in mine.items()},
                             {i: auto.time_of(r) for i, r in mine.items()})
        decision = rounds.decision(lambda n: auto.continue_command(self.config, sweep_id, n))
        for line in [outcomes.round_line(decision), *said]:
            print(line, flush=True)
        auto.tag_disturbed(sweep_id, rounds.disturbed[len(rounds.disturbed) - len(said):])
        auto.publish(decision, sweep_dir)
        return first_failure
