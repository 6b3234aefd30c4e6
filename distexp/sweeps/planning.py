"""Which jobs a sweep runs, in which order: repeats interleaved, and `sweep.resume`.

The planning behind distexp's Hydra sweeper (``hydra/sweeper=distexp``, the default; its round loop
is distexp.sweeps.sweep, the plugin class lives in ``hydra_plugins/distexp_sweeper`` because Hydra
only loads plugins from there).
It is Hydra's BasicSweeper (cartesian product of ``key=a,b`` overrides) plus:

- one run per set-up: jobs that train the same thing (``setup``: the config, with the keys whose
  effect is a resolved fact replaced by the facts) run once, the first of them kept, and one line
  names the others (``strategy=one_device,mirrored cpu_replicas=1,2``: one_device with
  ``cpu_replicas=2`` is one_device with 1); the report then has one row for it.
- ``repeats=N``: every job runs N times, interleaved round-robin (job1#0, job2#0, ..., job1#1,
  job2#1, ...), never N in a row, so a slow period of a shared machine hits every job rather than
  one; each run gets the override ``repeat=i`` (its own child run, tag ``distexp.repeat``).
- ``sweep.controls=true``: for each N-replica job, the 1-replica job at the same global batch
  (``strategy=one_device global_batch_size=<G>``, the job's other overrides kept) is added after
  the jobs, unless the sweep already has a job of that work; repeats apply to it too. The report
  then compares each N-replica job with one replica at equal work (strong speed-up).
- ``sweep.resume=<sweep id>``: each job's config is composed and compared (resolved, flattened as
  the job logs it) with the runs of that sweep in MLflow: a job with a FINISHED run is skipped
  (its record keeps that run's objective), one whose runs FAILED or were KILLED re-runs with
  ``resume=true`` from its own checkpoint dir under its original job number, a job the sweep
  never ran runs fresh. A sweep that measures (`repeats=auto`, `repeats=N` with N >= 2) re-runs
  an unfinished job from the start instead: its figures are a measurement, which a resumed
  training would lose (a checkpoint is for a user's job). The sweep keeps its id and its one
  parent run (distexp.sweeps reopens it).

No TensorFlow here; MLflow only with sweep.resume.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from omegaconf import DictConfig, OmegaConf, open_dict

from distexp import strategies
from distexp.config import schema
from distexp.console_lines import WIDTH
from distexp.errors import UserError
from distexp.figures import perf_keys
from distexp.tracking import tags as tag

# Keys that may differ between a job's first run and its re-run: not part of its identity.
# sweep.max_repeats: a continued auto sweep (a bigger budget) finds its earlier runs
NOT_IDENTITY = ("resume", "sweep.resume", "tracking.uri", "checkpoint.dir", "sweep.max_repeats",
                "checkpoint.keep_in_sweeps")
# Params the job logs with the value it computed when the config leaves them null.
COMPUTED = ("global_batch_size",)


def interleave(jobs: Sequence[Sequence[str]], repeats: int) -> List[List[str]]:
    """Round-robin: [j1 + repeat=0, j2 + repeat=0, ..., j1 + repeat=1, ...]."""
    if repeats <= 1:
        return [list(j) for j in jobs]
    return [[*j, f"repeat={i}"] for i in range(repeats) for j in jobs]


# Override keys a control replaces (the strategy and its options, the global batch). A given
# batch_size_per_replica stays: global_batch_size fixes the batch, and learning_rate_scaling
# scales by global batch / batch_size_per_replica, so the control trains at the job's rate.
CONTROL_DROPS = ("strategy", "global_batch_size")


def _override_key(o: str) -> str:
    return o.split("=", 1)[0].lstrip("+~")


def controls_on(config: DictConfig, overrides) -> bool:
    """`sweep.controls`: from the sweep's overrides, else the config (a preset)."""
    for o in overrides:
        if o.get_key_element() == "sweep.controls":
            if o.is_sweep_override():
                raise UserError(f"sweep.controls: received a sweep ({o.input_line}); expected "
                                "true or false for the whole sweep")
            return str(o.value()).lower() == "true"
    return bool(OmegaConf.select(config, "sweep.controls", default=False))


# Keys whose whole effect on what a job trains is in the facts `setup` adds instead (replicas,
# global batch, learning rate, CPU or GPU): one_device with cpu_replicas=1 or 2 is one set-up. A
# count key the strategy's cluster uses (multiworker's `workers`, ps's `ps`) stays as it is.
FACT_INPUTS = ("cpu_replicas", "gpus", "workers", "ps", "batch_size_per_replica",
               "global_batch_size", "learning_rate", "learning_rate_scaling")


@dataclass(frozen=True)
class Setup:
    """What a job trains: its replicas and global batch, and `key`, equal for two jobs exactly
    when they train the same thing (`setup`)."""
    replicas: int
    global_batch: int
    key: tuple


def setup(cfg: DictConfig, found=None) -> Optional[Setup]:
    """The job's set-up: its config as its run logs it (without what a re-run may change, the
    FACT_INPUTS) plus the facts those resolve to (distexp.config.resolved). Seed, epochs, repeats,
    the strategy, its options, the model, the data and every knob are part of it. None for a job
    that fails the checks (it stays a job of its own, and fails as one). `found`: its checked
    facts (config.resolved.JobFacts), when the caller has them (distexp.sweeps.sweep)."""
    from distexp.config import checks, resolved

    job = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    with open_dict(job):
        job.pop("hydra", None)
    try:
        facts = (found if found is not None else checks.validate(job)).layout
    except UserError:
        return None
    kept = set(strategies.of(job).count_keys())
    rest = {k: v for k, v in identity(cfg).items() if k not in FACT_INPUTS or k in kept}
    for name in ("replicas_per_worker", "workers", "sync_workers", "global_batch"):
        rest[f"resolved.{name}"] = str(facts[name])
    rest["resolved.on_gpu"] = str(facts["gpus"] > 0)
    rest["resolved.learning_rate"] = repr(resolved.learning_rate(job, facts["global_batch"]))
    return Setup(int(facts["replicas"]), int(facts["global_batch"]), tuple(sorted(rest.items())))


# setup_of(overrides) -> (the composed config, its Setup or None: `setup`); (None, None) when it
# does not compose (distexp.sweeps.sweep.Sweep.setup_of: each found once)
SetupOf = Callable[[Sequence[str]], tuple]


def merge(jobs: Sequence[Sequence[str]],
          setup_of: SetupOf) -> Tuple[List[List[str]], Optional[str]]:
    """The jobs, each set-up once (the first job of it kept, in order); and one line naming the
    jobs merged into another, or None. One job's runs are `repeats`, not copies of the job."""
    out, first, merged = [], {}, []
    for job in jobs:
        found = setup_of(job)[1]
        if found is not None and found.key in first:
            merged.append((job, first[found.key]))
            continue
        if found is not None:
            first[found.key] = list(job)
        out.append(list(job))
    if not merged:
        return out, None
    common = set.intersection(*(set(j) for j in jobs))  # e.g. repeats=3: said once, not per job

    def shown(job):
        return " ".join(o for o in job if o not in common)

    pairs = "".join(f"\n  [{shown(job)}] -> [{shown(kept)}]" for job, kept in merged)  # a line each
    return out, (f"sweep: {len(merged)} job(s) merged into an earlier job of the same set-up "
                 f"(strategy, replicas, global batch, model, data, knobs):{pairs}")


def with_controls(jobs: Sequence[Sequence[str]],
                  setup_of: SetupOf) -> Tuple[List[List[str]], List[str]]:
    """The jobs plus, for each N-replica job, its 1-replica control at the same global batch
    (module docstring); and one line per control saying what it is for."""
    out, base = [list(j) for j in jobs], strategies.baseline().name
    done = [setup_of(j) for j in jobs]
    seen, controls = {s.key for _, s in done if s is not None}, {}
    for job, (cfg, known) in zip(jobs, done):
        if known is None or known.replicas <= 1:
            continue
        kept = [o for o in job if _override_key(o).split(".", 1)[0] not in CONTROL_DROPS]
        control = [f"strategy={base}", *kept, f"global_batch_size={known.global_batch}"]
        work = setup_of(control)[1]
        if work is None:
            continue
        name = f"{cfg.strategy.name} x{known.replicas}"
        if work.key in seen:
            if work.key in controls:
                controls[work.key][1].append(name)
            continue
        seen.add(work.key)
        controls[work.key] = (control, [name])
    for control, names in controls.values():
        out.append(control)
    lines = [f"sweep.controls: + {base} at global batch {c[-1].split('=', 1)[1]} (equal work for "
             f"{', '.join(n)}):\n" + textwrap.fill(" ".join(c), WIDTH, initial_indent="  ",
                                                   subsequent_indent="  ", break_long_words=False,
                                                   break_on_hyphens=False)
             for c, n in controls.values()]
    return out, lines


def repeats(config: DictConfig, overrides):
    """The sweep's `repeats`: from its overrides (command line or hydra.sweeper.params), else the
    config; `repeats` is one number (or `auto`: distexp.sweeps.auto) for the whole sweep and
    `repeat` is the sweeper's to set."""
    check_overrides(overrides)
    value = OmegaConf.select(config, "repeats", default=1)
    for o in overrides:
        if o.get_key_element() == "repeats":
            value = o.value()
    if schema.is_auto(value):
        return schema.AUTO
    return int(value or 1)


def check_overrides(overrides) -> None:
    for o in overrides:
        key = o.get_key_element()
        if key == "repeat":
            raise UserError("repeat: set by the sweeper for each run; use repeats=N for N runs "
                            "of every job")
        if key == "repeats" and o.is_sweep_override():
            raise UserError(f"repeats: received a sweep ({o.input_line}); expected one number "
                            "for the whole sweep, e.g. repeats=3")


def identity(cfg: DictConfig) -> Dict[str, str]:
    """A job's resolved config as the params its run logs, without what a re-run may change."""
    from distexp.config.schema import flatten

    with_hydra = OmegaConf.to_container(cfg, resolve=False)
    with_hydra.pop("hydra", None)
    flat = flatten(OmegaConf.create(with_hydra))
    return {k: v for k, v in flat.items() if k not in NOT_IDENTITY}


def _matches(ident: Dict[str, str], params: Dict[str, str]) -> bool:
    from distexp.tracking.sink import clip

    return all(params.get(k) == clip(v) for k, v in ident.items()
               if not (k in COMPUTED and v == "null"))


@dataclass
class Launches:
    """What a sweep launches (a resumed one: its new and re-run jobs; the finished ones skipped)."""
    launch: List[Tuple[int, List[str]]] = field(default_factory=list)  # (job num, overrides)
    skipped: List[dict] = field(default_factory=list)                # sweep_jobs records
    reruns: int = 0


def place(job: Sequence[str], job_cfg: DictConfig, runs: List[dict], used: set,
          measure: bool = False):
    """What a resumed sweep does with one job, given the original sweep's runs (`used`: run ids
    already matched, updated): ("skip", num, its record) for a FINISHED run, ("rerun", num,
    overrides + resume=true) for a FAILED/KILLED one (`measure`: the overrides as they are, a
    run from the start), ("new", None, overrides) otherwise."""
    ident = identity(job_cfg)
    mine = [r for r in runs if r["run_id"] not in used and _matches(ident, r["params"])]
    done = [r for r in mine if r["status"] == "FINISHED"]
    if done:
        r = done[0]
        used.add(r["run_id"])
        return "skip", r["num"], {
            "num": r["num"], "overrides": list(job), "status": "COMPLETED",
            "value": run_objective(r, job_cfg), "error": None, "job_dir": r["job_dir"],
            "examples_per_sec": r["metrics"].get(perf_keys.EXAMPLES_PER_SEC),
            "accuracy": r["metrics"].get(perf_keys.EVAL_ACCURACY),
            "disturbed": r.get("tags", {}).get(tag.DISTURBED),
            "skipped": f"FINISHED in run {r['run_id']}"}
    tried = [r for r in mine if r["status"] in ("FAILED", "KILLED") and r["num"] is not None]
    if tried:
        r = tried[-1]  # the latest attempt (runs come oldest first)
        used.update(x["run_id"] for x in mine)
        if measure:
            return "rerun", r["num"], list(job)
        extra = ["resume=true"]
        if r["params"].get("checkpoint.dir"):
            extra.append(f"checkpoint.dir={_quote(r['params']['checkpoint.dir'])}")
        return "rerun", r["num"], [*job, *extra]
    return "new", None, list(job)


def plan(jobs: Sequence[Sequence[str]], config: DictConfig,
         compose: Callable[[List[str]], DictConfig], measure: bool = False) -> Launches:
    """Job numbers and overrides to launch (everything, unless sweep.resume is set); `measure`
    (repeats=N >= 2): an unfinished job re-runs from the start (`place`)."""
    sweep_id = OmegaConf.select(config, "sweep.resume")
    if not sweep_id:
        return Launches(launch=[(n, list(j)) for n, j in enumerate(jobs)])
    runs = sweep_runs(config, str(sweep_id))
    out = Launches()
    taken = {r["num"] for r in runs if r["num"] is not None}
    next_num = max(taken, default=-1) + 1
    used = set()
    for job in jobs:
        what, num, got = place(job, compose(list(job)), runs, used, measure)
        if what == "skip":
            out.skipped.append(got)
            continue
        if what == "rerun":
            out.launch.append((num, got))
            out.reruns += 1
            continue
        while next_num in taken:
            next_num += 1
        out.launch.append((next_num, list(job)))
        taken.add(next_num)
    if not out.skipped and not out.reruns:
        raise UserError(f"sweep.resume: received {sweep_id!r}; none of this command's "
                        f"{len(jobs)} jobs matches a run of that sweep (run the sweep's own "
                        f"command again, plus sweep.resume=...: {_original_command(config, sweep_id)})")
    out.launch.sort()
    how = ("from the start (a measurement: its checkpoint not used)" if measure
           else "with resume=true")
    print(f"Resuming sweep {sweep_id}: {len(out.skipped)} job(s) FINISHED there (skipped), "
          f"{out.reruns} re-run {how}, {len(out.launch) - out.reruns} new", flush=True)
    return out


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _parent(client, config: DictConfig, sweep_id: str):
    from distexp.tracking import lookup

    exp = client.get_experiment_by_name(config.tracking.experiment)
    found = None if exp is None else lookup.sweep_parent(client, exp.experiment_id, sweep_id)
    if found is None:
        raise UserError(f"sweep.resume: received {sweep_id!r}; no such sweep in experiment "
                        f"{config.tracking.experiment!r} of the tracking store (the id is printed "
                        "when a sweep starts: 'Sweep <id>: MLflow parent run ...')")
    return exp.experiment_id, found


def find_parent(config: DictConfig, sweep_id: str):
    """The original sweep's parent run (raises UserError when there is none)."""
    from distexp import tracking

    if not config.tracking.enabled:
        raise UserError("sweep.resume: received a sweep id with tracking.enabled=false; resuming "
                        "reads the sweep's runs from MLflow")
    return _parent(tracking.client(config.tracking.uri), config, sweep_id)[1]


def sweep_runs(config: DictConfig, sweep_id: str) -> List[dict]:
    from distexp import tracking

    if not config.tracking.enabled:
        find_parent(config, sweep_id)  # raises the one-line refusal
    from distexp.tracking import lookup

    client = tracking.client(config.tracking.uri)
    exp_id, _ = _parent(client, config, sweep_id)
    out = []
    for r in lookup.sweep_jobs(client, exp_id, sweep_id):
        num = r.data.tags.get(tag.JOB_NUM)
        out.append({"run_id": r.info.run_id, "status": r.info.status,
                    "num": int(num) if num is not None and num.isdigit() else None,
                    "params": dict(r.data.params), "job_dir": r.data.tags.get(tag.JOB_DIR),
                    "metrics": dict(r.data.metrics),
                    "tags": {tag.DISTURBED: r.data.tags.get(tag.DISTURBED)}})
    return out


def run_objective(run: dict, job_cfg: DictConfig) -> Optional[float]:
    """A FINISHED run's objective figure: the metric its chief trainer named from the job's facts
    (param resolved.OBJECTIVE_PARAM; a user's task's own objective included, which only the
    trainer knows). A run logged before that param existed: the job's facts as resolved here
    (resolved.objective_name), and None for a user's task (its objective is unknown here)."""
    from distexp.config import resolved

    name = run["params"].get(resolved.OBJECTIVE_PARAM) or resolved.objective_name(job_cfg)
    return run["metrics"].get(name) if name else None


def _original_command(config: DictConfig, sweep_id: str) -> str:
    parent = find_parent(config, sweep_id)
    return f"python -m distexp -m {parent.data.params.get('overrides', '')}".strip()


def batches(launch: Sequence[Tuple[int, List[str]]],
            max_batch_size: Optional[int]) -> List[Tuple[int, List[List[str]]]]:
    """(first job num, overrides) batches: consecutive job numbers (a launcher numbers a batch's
    jobs first, first + 1, ...), at most max_batch_size each."""
    out: List[Tuple[int, List[List[str]]]] = []
    for num, job in launch:
        if out and out[-1][0] + len(out[-1][1]) == num and \
                (not max_batch_size or max_batch_size < 0 or len(out[-1][1]) < max_batch_size):
            out[-1][1].append(job)
        else:
            out.append((num, [job]))
    return out
