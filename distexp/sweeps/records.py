"""What a sweep writes beside its jobs and the tags that tie its runs together."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Sequence

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


def write_records(sweep_dir: Path, records: Sequence[dict]) -> None:
    jobs = sweep_dir / JOBS_DIR
    jobs.mkdir(parents=True, exist_ok=True)
    for rec in records:
        (jobs / f"{rec['num']}.json").write_text(json.dumps(rec, indent=1))
