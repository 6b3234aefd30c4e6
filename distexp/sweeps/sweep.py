"""One sweep of distexp's sweeper (``hydra/sweeper=distexp``): its jobs, composed and checked once
each, and its one round loop (no TensorFlow here; MLflow only through its parent run and
`sweep.resume`). The Hydra plugin (``hydra_plugins/distexp_sweeper``) parses the command's
overrides, opens the sweep and launches what this loop hands it: Hydra's glue, no rounds.

- `Sweep.plan(jobs, overrides)`, before anything is written: the set-ups (planning.merge), their
  controls (`sweep.controls`), `repeats`, a resumed sweep's plan, and every job's checks (the
  first that fails refuses the sweep in its one line). A job's config is composed once per
  overrides (`compose` hands out copies) and checked once per set-up: a launch that only adds the
  ``repeat=<r>`` the sweeper sets shares its set-up's checks (`checks.validate` reads ``repeat``
  only to range-check it, and the sweeper sets it in range).
- `Sweep.run(opened, launch)`: the round loop, handed the sweep's `OpenSweep` (its id and parent
  run; None when the sweep callback is not installed). Each step launches its jobs (`launch`:
  (job number, overrides) pairs, returns the first failure), then records their figures in
  distexp.sweeps.auto.Rounds, says which runs were disturbed, tags them and publishes the decision.
  ``repeats=N``: one step, every round planned at once (a fixed-sample rule: nothing is decided
  between rounds), then one look over the N rounds (with N >= 2 and two set-ups at least).
  ``repeats=auto``: a step a round, until the rule says the sweep's question is answered.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from omegaconf import DictConfig, OmegaConf, open_dict

from distexp.errors import UserError
from distexp.figures import outcomes
from distexp.sweeps import auto, job_figures, planning, records, setups

Launch = List[Tuple[int, List[str]]]  # (job number, overrides)


@dataclass
class Step:
    """One step of the round loop: what it launches, and for every job of its rounds (launched,
    or replayed from a resumed sweep) its (round of the step, set-up index) by job number."""
    launch: Launch
    slots: Dict[int, Tuple[int, int]] = field(default_factory=dict)
    rounds: int = 1


class Sweep:
    """A sweep's jobs, their configs and set-ups (each found once), and its round loop."""

    def __init__(self, config: DictConfig, compose: Callable[[List[str]], DictConfig]):
        self.config = config
        self._compose = compose
        self._configs: Dict[tuple, DictConfig] = {}
        self._checks: Dict[tuple, object] = {}  # overrides: JobFacts or the UserError raised
        self._setups: Dict[tuple, Optional[planning.Setup]] = {}
        self.jobs: List[List[str]] = []
        self.controls: List[int] = []
        self.repeats = 1
        self.launches: Optional[planning.Launches] = None  # repeats=N: every round's
        self.order: Optional[List[List[str]]] = None  # repeats=N: the jobs as planned
        self.rounds: Optional[auto.Rounds] = None
        self.opened = None
        self.sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()

    # --- the jobs, composed and checked once
    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The job's config, composed once for these overrides (a copy each call: callers may
        edit it); Hydra's exception for a job that does not compose, each time."""
        key = tuple(overrides)
        if key not in self._configs:
            self._configs[key] = self._compose(list(overrides))
        return copy.deepcopy(self._configs[key])

    def _checked(self, overrides: Sequence[str]):
        """The job's facts (distexp.config.checks.validate), or the UserError it raised: once per
        overrides, a trailing ``repeat=<r>`` aside (module docstring)."""
        key = _without_repeat(overrides)
        if key not in self._checks:
            from distexp.config import checks

            cfg = self.compose(list(key))
            with open_dict(cfg):
                del cfg["hydra"]  # a job's config, as the job sees it
            try:
                self._checks[key] = checks.validate(cfg)
            except UserError as ex:
                self._checks[key] = ex
        return self._checks[key]

    def check(self, overrides: Sequence[str]) -> None:
        """Before the first job starts (nothing written, no parent run): the job's config composes
        and passes distexp.config.checks, else its one line (`-m epochs=1,0`: job 2's `epochs:
        received 0`, before job 1 trains). A job that fails later, as it runs (its data, its
        model, the machine), fails alone and the sweep goes on."""
        found = self._checked(overrides)
        if isinstance(found, UserError):
            raise found

    def setup_of(self, overrides: Sequence[str]):
        """(the job's config, its planning.Setup or None: a job that fails its checks); (None,
        None) for one that does not compose (it fails as a job, alone)."""
        try:
            cfg = self.compose(overrides)
        except Exception:  # noqa: BLE001
            return None, None
        key = tuple(overrides)
        if key not in self._setups:
            found = self._checked(overrides)
            self._setups[key] = (None if isinstance(found, UserError)
                                 else planning.setup(cfg, found))
        return cfg, self._setups[key]

    def keys(self) -> List[str]:
        """The set-ups' keys, by index (distexp.sweeps.setups)."""
        return [setups.key_of(self.setup_of(j)[1], j) for j in self.jobs]

    # --- before anything is written
    def plan(self, jobs: Sequence[Sequence[str]], overrides) -> List[str]:
        """The sweep's set-ups, controls, repeats and (repeats=N) launches, every job checked;
        the lines that say what was merged and added."""
        found, merged = planning.merge(jobs, self.setup_of)
        lines = [merged] if merged else []
        if planning.controls_on(self.config, overrides):
            first = len(found)
            found, more = planning.with_controls(found, self.setup_of)
            self.controls, lines = list(range(first, len(found))), lines + more
        self.jobs = found
        self.repeats = planning.repeats(self.config, overrides)
        if self.sequential:
            checked = [[*j, "repeat=0"] for j in found]
        else:
            self.order = auto.interleaved(found, self.repeats, self.compose)  # seeds by round
            self.launches = planning.plan(self.order, self.config, self.compose,
                                          measure=self.repeats >= 2)
            checked = [job for _, job in self.launches.launch]
        for job in checked:
            self.check(job)
        return lines

    @property
    def sequential(self) -> bool:
        return self.repeats == auto.AUTO

    # --- the round loop
    def run(self, opened, launch: Callable[[Launch], object]):
        """The rounds (module docstring), handed the sweep's `OpenSweep`; the first failed job's
        return (Hydra's JobReturn), or None."""
        self.opened, first_failure = opened, None
        self.rounds = self._rounds()
        steps = self._steps()
        for step in steps:
            failure = launch(step.launch)
            first_failure = first_failure or failure
            self._look(step)
        return first_failure

    def _rounds(self) -> Optional[auto.Rounds]:
        alpha, margin, most = auto.settings(self.config)
        accuracy = auto.accuracy_settings(self.config)
        if self.sequential:
            return auto.Rounds(self.jobs, self.setup_of, alpha, margin, most,
                               controls=self.controls, horizon=planned_horizon(self.config),
                               **accuracy)
        if self.repeats < 2 or len(self.jobs) < 2:
            return None  # nothing to decide
        return auto.Rounds(self.jobs, self.setup_of, alpha, margin, self.repeats,
                           controls=self.controls, repeats=self.repeats,
                           accuracy_margin=accuracy["accuracy_margin"])

    def _steps(self):
        if not self.sequential:
            yield self._planned()
            return
        replay = (resume_runs(self.config), set())
        launched: List[int] = []
        while not self.rounds.finished():
            yield self._round(replay, launched)

    def _planned(self) -> Step:
        """repeats=N: every round at once; a resumed sweep's finished jobs replayed."""
        launches = self.launches
        records.write_records(self.sweep_dir, launches.skipped)
        records.write_plan(self.sweep_dir, [num for num, _ in launches.launch])
        setups.hand_out(self.sweep_dir, self.keys(),  # each run's set-up tags
                        setups.positions(self.jobs, self.repeats, launches.launch, self.order))
        places = setups.places(self.jobs, self.repeats, [
            *launches.launch, *((r["num"], r["overrides"]) for r in launches.skipped)],
            self.order)
        n = len(self.jobs)
        return Step(launches.launch, {num: (p // n, p % n) for num, p in places.items()},
                    rounds=self.repeats)

    def _round(self, replay, launched: List[int]) -> Step:
        """repeats=auto, one round: replay what a resumed sweep has (a job interrupted before
        its figures runs again from the start: said in one line), launch the rest."""
        rounds, (runs, used) = self.rounds, replay
        launch, index, skipped = [], {}, []
        for num, job in rounds.round_jobs():
            index[num] = num % len(rounds.jobs)
            what, old, got = ("new", None, job) if runs is None else \
                planning.place(job, self.compose(job), runs, used, measure=True)
            if what == "skip":
                skipped.append({**got, "num": num})
                continue
            if what == "rerun":
                print(f"Resuming sweep {self.config.sweep.resume}: round {rounds.rounds + 1}, "
                      f"{rounds.names[index[num]]} (job {old}) did not finish there: it runs "
                      f"again from the start as job {num} (a measurement: its checkpoint not "
                      "used)", flush=True)
            launch.append((num, got))
        records.write_records(self.sweep_dir, skipped)
        launched += [num for num, _ in launch]  # the console's "job k of at most N"
        records.write_plan(self.sweep_dir, launched, at_most=len(launched) + len(launch) * max(
            rounds.max_repeats - rounds.rounds - 1, 0), names={n: rounds.names[i]
                                                                for n, i in index.items()})
        setups.hand_out(self.sweep_dir, rounds.keys, index)  # each run's set-up tags
        return Step(launch, {num: (0, i) for num, i in index.items()})

    def _look(self, step: Step) -> None:
        """The step's rounds recorded (their runs' figures, from the sweep's records), the lines
        that say which were disturbed (after the round's line: repeats=auto), the disturbed runs
        tagged, the decision published."""
        rounds = self.rounds
        if rounds is None:
            return
        done = {int(r["num"]): r for r in records.records(self.sweep_dir)}
        before, said = len(rounds.disturbed), []
        for r in range(step.rounds):
            mine = {i: (num, done.get(num, {})) for num, (k, i) in step.slots.items() if k == r}
            said += rounds.record({i: job_figures.rate_of(rec) for i, (_, rec) in mine.items()},
                                  {i: job_figures.window_of(rec) for i, (_, rec) in mine.items()},
                                  {i: num for i, (num, _) in mine.items()},
                                  {i: job_figures.accuracy_of(rec) for i, (_, rec) in mine.items()},
                                  {i: job_figures.time_of(rec) for i, (_, rec) in mine.items()})
        sweep_id = self.opened.sweep_id if self.opened is not None else None
        if self.sequential:
            decision = rounds.decision(lambda n: continue_command(self.config, sweep_id, n))
            said = [outcomes.round_line(decision), *said]
        else:
            decision = rounds.decision()
        for line in said:
            print(line, flush=True)
        tag_disturbed(self.opened, rounds.disturbed[before:])
        auto.publish(decision, self.sweep_dir, self.opened.run if self.opened else None)


def _without_repeat(overrides: Sequence[str]) -> tuple:
    """The overrides without the sweeper's trailing ``repeat=<r>``, or ``repeat=<r>
    seed=<n>`` (`sweep.seed_by_round`: checks.validate reads the seed only to range-check it, and
    a round's is the set-up's plus the round)."""
    out = list(overrides)
    if out and out[-1].startswith("seed=") and len(out) > 1 and out[-2].startswith("repeat="):
        out.pop()
    last = out[-1] if out else ""
    if last.startswith("repeat=") and last[len("repeat="):].isdigit():
        return tuple(out[:-1])
    return tuple(overrides)


def tag_disturbed(opened, flags: Sequence[dict]) -> None:
    """Tag each flagged run (tags.DISTURBED: the reason) through the open sweep's (`opened`, an
    ending.OpenSweep or None) MLflow client: the job's run with that sweep id and job number.
    Never fails the sweep."""
    from distexp.tracking import tags as tag

    run = opened.run if opened is not None else None
    sweep_id = opened.sweep_id if opened is not None else None
    if run is None or getattr(run, "offline", None) is not None or not sweep_id:
        return
    for f in flags:
        try:
            query = (f"tags.`{tag.SWEEP_ID}` = '{sweep_id}' and tags.`{tag.JOB_NUM}` = "
                     f"'{f['job']}' and tags.`{tag.RUN_KIND}` = 'job'")
            for job in run.client.search_runs([run.experiment_id], query, max_results=5):
                run.client.set_tag(job.info.run_id, tag.DISTURBED, f["reason"])
        except Exception as ex:  # noqa: BLE001
            print(f"distexp: job {f['job']}'s run not tagged disturbed: "
                  f"{type(ex).__name__}", flush=True)


def planned_horizon(config: DictConfig) -> Optional[int]:
    """A resumed auto sweep's planned rounds (its first sweep's, from its parent's decision):
    the boundary a continuation keeps."""
    sweep_id = OmegaConf.select(config, "sweep.resume")
    if not sweep_id:
        return None
    from distexp.tracking import tags as tag

    try:
        parent = planning.find_parent(config, str(sweep_id))
    except Exception:  # noqa: BLE001  (the callback has refused a missing one already)
        return None
    found = outcomes.from_json(parent.data.tags.get(tag.OUTCOMES))
    return found.horizon if found is not None and not found.fixed else None


def continue_command(config: DictConfig, sweep_id: Optional[str], rounds: int) -> Optional[str]:
    """python -m distexp -m <the sweep's overrides, Hydra's own included: hydra/launcher=...>
    sweep.resume=<id> sweep.max_repeats=<n>; not hydra.sweep.dir: the continued sweep writes a
    folder of its own (the same folder would mix its jobs' folders with the first sweep's), and
    the decision of a resumed sweep equals its first's."""
    if not sweep_id:
        return None
    import shlex

    from distexp.tracking.redaction import redact_text

    given = [*(OmegaConf.select(config, "hydra.overrides.hydra") or []),
             *config.hydra.overrides.task]
    kept = [o for o in given if o.split("=", 1)[0].lstrip("+~")
            not in ("sweep.resume", "sweep.max_repeats", "hydra.mode", "hydra.sweep.dir")]
    return redact_text(" ".join(["python -m distexp -m", *map(shlex.quote, kept),
                                 f"sweep.resume={sweep_id}", f"sweep.max_repeats={rounds}"]))


def resume_runs(config: DictConfig) -> Optional[List[dict]]:
    sweep_id = OmegaConf.select(config, "sweep.resume")
    return planning.sweep_runs(config, str(sweep_id)) if sweep_id else None
