"""A sweep's bookkeeping, in one place: what it writes beside its jobs (sweep.json, one record per
job in sweep_jobs/<num>.json: written only here), and how the records decide the sweep's
outcome (its parent run's status and the command's exit code, from the table in distexp.errors)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from distexp import errors

SWEEP_FILE = "sweep.json"
AUTO_FILE = "auto.json"  # the sweep's decision (distexp.figures.outcomes)
JOBS_DIR = "sweep_jobs"

def records(sweep_dir: Path) -> List[dict]:
    out = []
    for p in sorted((sweep_dir / JOBS_DIR).glob("*.json"), key=lambda p: int(p.stem)):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return out


def write_record(sweep_dir: Path, record: dict, *, if_absent: bool = False) -> None:
    """One job's record: num, overrides, status (COMPLETED/FAILED), value, error, job_dir.
    `if_absent`: keep a record the job itself wrote (the Slurm launcher's fallback)."""
    path = sweep_dir / JOBS_DIR / f"{record['num']}.json"
    if if_absent and path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))


def write_plan(sweep_dir: Path, nums: Sequence[int], *, at_most: Optional[int] = None,
               names: Optional[Dict[int, str]] = None) -> None:
    """Add the jobs this sweep launches (their numbers, in launch order) and its start (the first
    call's) to sweep.json: each job's console shows "job k of N" and the sweep's ETA
    (distexp.job.console). repeats=auto writes it before each round: the jobs launched so far,
    `at_most` jobs in all, and the jobs' set-up `names`."""
    import time

    path = sweep_dir / SWEEP_FILE
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        info = {}
    info.update({"launch": [int(n) for n in nums], "started": info.get("started", time.time())})
    if at_most is not None:
        info["at_most"] = int(at_most)
    if names:
        info["names"] = {**info.get("names", {}), **{str(n): v for n, v in names.items()}}
    path.write_text(json.dumps(info, indent=1))


def write_records(sweep_dir: Path, records: Sequence[dict]) -> None:
    for rec in records:
        write_record(sweep_dir, rec)


def outcome(jobs: Sequence[dict], *, error: Optional[BaseException] = None,
            interrupted: bool = False) -> Tuple[str, int]:
    """(the parent run's status, the command's exit code) from the jobs' records: KILLED / 130
    when interrupted, FAILED / 1 when a job (or the sweep itself) failed, else FINISHED / 0."""
    if interrupted:
        status = "KILLED"
    elif error is not None or any(j["status"] != "COMPLETED" for j in jobs):
        status = "FAILED"
    else:
        status = "FINISHED"
    return status, errors.exit_code_of(status)


def swept_keys(config) -> List[str]:
    """The keys this sweep varies: the command line's sweep overrides (`a=1,2`, `range(...)`,
    `choice(...)`, ...) and the sweeper's own `params`, in that order, as Hydra parses them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    keys: List[str] = []
    try:
        parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
        keys += [o.key_or_group for o in parsed if o.is_sweep_override()]
    except Exception:  # noqa: BLE001  (Hydra has parsed them once already; names only)
        pass
    from omegaconf import OmegaConf

    params = OmegaConf.select(config, "hydra.sweeper.params")
    keys += [str(k) for k in (params or {}) if str(k) not in keys]
    return keys


def swept_values(cfg_sweep_dir: str) -> Dict[str, str]:
    """In a sweep's job: the swept keys (sweep.json) and this job's value of each."""
    try:
        swept = json.loads((Path(cfg_sweep_dir).absolute() / SWEEP_FILE).read_text()).get("swept", [])
        from hydra.core.hydra_config import HydraConfig

        task = dict(o.lstrip("+~").split("=", 1) for o in HydraConfig.get().overrides.task if "=" in o)
    except (OSError, ValueError, ImportError):
        return {}
    return {k: task[k] for k in swept if k in task}
