"""A sweep's bookkeeping, in one place: what it writes beside its jobs (sweep.json, one record per
job in sweep_jobs/<num>.json: written only here), the tags that tie its runs together, and how
the records decide the sweep's outcome (its parent run's status and the command's exit code,
from the table in distexp.errors)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from distexp import errors

SWEEP_FILE = "sweep.json"
JOBS_DIR = "sweep_jobs"
RUN_KIND = "distexp.run_kind"
SWEEP_ID = "distexp.sweep_id"

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


def write_records(sweep_dir: Path, records: Sequence[dict]) -> None:
    for rec in records:
        write_record(sweep_dir, rec)


def outcome(jobs: Sequence[dict], *, error: Optional[BaseException] = None,
            interrupted: bool = False) -> Tuple[str, int]:
    """(the parent run's status, the command's exit code) from the jobs' records: KILLED / 130
    when interrupted, FAILED / 1 when a job (or the sweep itself) failed, else FINISHED / 0."""
    if interrupted:
        return "KILLED", errors.INTERRUPTED
    if error is not None or any(j["status"] != "COMPLETED" for j in jobs):
        return "FAILED", errors.FAILED
    return "FINISHED", errors.OK
