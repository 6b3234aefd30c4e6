"""A set-up's one identity in a sweep: its index in the sweep's list and its key, handed by the
sweeper to each job and tagged on the job's run (no MLflow, no TensorFlow).

- `key_of(setup, job)`: a short stable hash (12 hex digits) of `planning.Setup.key` (what the job
  trains: two jobs have the same key exactly when they train the same thing), or of the job's
  overrides for a job that fails its checks (no Setup).
- the sweep's set-ups' keys, by index (the order of the sweeper's jobs, the decision's `setups` and
  `setup_keys`): distexp.sweeps.sweep.Sweep.keys and auto.Rounds.keys, by `key_of`.
- `hand_out(sweep_dir, keys, of_num)`: before the jobs launch, sweep.json gets the keys and each
  job number's set-up index; `child_tags(info, num)` (in the job, distexp.sweeps.parent) reads them
  back as the run's tags ``distexp.setup_index`` and ``distexp.setup_key``.
- `positions(jobs, repeats, launch)`: under ``repeats=N`` which job of the sweep each launched
  (number, overrides) is (`places`: its place in the interleaved jobs): its overrides start with
  that job's interleaved ones (a re-run of `sweep.resume` adds ``resume=true ...`` after them),
  whatever number it was given.

The report, the parent run's table and the UI group runs by the tag, not by a job number
(docs/sweeps.md, "A set-up's identity"); `sweep.resume` keeps a set-up's key (planning.NOT_IDENTITY
is not part of it).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from distexp.sweeps import planning
from distexp.sweeps.records import SWEEP_FILE
from distexp.tracking import tags as tag

KEYS = "setup_keys"   # sweep.json: [key of set-up 0, 1, ...]
OF_NUM = "setup_of"   # sweep.json: {job number: set-up index}


def key_of(setup: Optional[planning.Setup], job: Sequence[str] = ()) -> str:
    what = [list(kv) for kv in setup.key] if setup is not None else {"overrides": list(job)}
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:12]


def hand_out(sweep_dir: Path, setup_keys: Sequence[str], of_num: Dict[int, int]) -> None:
    """Add the set-ups' keys and each job number's set-up (merged with earlier rounds') to
    sweep.json, which each job reads when its run is created."""
    path = Path(sweep_dir) / SWEEP_FILE
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        info = {}
    info[KEYS] = list(setup_keys)
    info[OF_NUM] = {**info.get(OF_NUM, {}), **{str(n): int(i) for n, i in of_num.items()}}
    path.write_text(json.dumps(info, indent=1))


def child_tags(info: dict, num: int) -> Dict[str, str]:
    """The run's set-up tags from sweep.json (`hand_out`); none for a job it does not list."""
    index = (info.get(OF_NUM) or {}).get(str(num))
    found = info.get(KEYS) or []
    if index is None or not 0 <= int(index) < len(found):
        return {}
    return {tag.SETUP_INDEX: str(int(index)), tag.SETUP_KEY: str(found[int(index)])}


def positions(jobs: Sequence[Sequence[str]], repeats: int,
              launch: Sequence[Tuple[int, Sequence[str]]],
              interleaved: Optional[Sequence[Sequence[str]]] = None) -> Dict[int, int]:
    """{job number: set-up index} of `repeats=N` launches (module docstring); `interleaved`:
    the jobs as planned (seeded by round: distexp.sweeps.auto.interleaved), else interleave's."""
    return {num: p % len(jobs) for num, p in places(jobs, repeats, launch, interleaved).items()}


def places(jobs: Sequence[Sequence[str]], repeats: int,
           launch: Sequence[Tuple[int, Sequence[str]]],
           interleaved: Optional[Sequence[Sequence[str]]] = None) -> Dict[int, int]:
    """{job number: its place in the interleaved jobs (round x set-ups + set-up)} of `repeats=N`
    jobs (module docstring: `positions`); `interleaved` as `positions`'."""
    order = {tuple(j): p for p, j in enumerate(
        interleaved if interleaved is not None else planning.interleave(jobs, repeats))}
    sizes = sorted({len(j) for j in order}, reverse=True)
    out = {}
    for num, overrides in launch:
        found = next((order[tuple(overrides[:n])] for n in sizes
                      if tuple(overrides[:n]) in order), None)
        if found is not None:
            out[num] = found
    return out
