"""An interrupted sweep, in the sweep process (no TensorFlow): the one line a stopped sweep ends
with (what was kept, the command that continues it), and, when the same sweep command runs again
without `sweep.resume`, the one line naming the interrupted sweep of the same overrides that the
store holds (the command starts a new sweep all the same: the user decides).

- ``stopped_line``: `interrupted by SIGINT: sweep <id> stopped`, then what was kept, the sweep's
  directory and the command that continues it (`python -m distexp -m ... sweep.resume=<id>`),
  each path and command on lines of their own (distexp.__main__ prints it, exit 130)
- ``announce``: called by distexp.sweeps.callback before a new sweep's parent run is opened
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from distexp import console_lines
from distexp.sweeps.records import records
from distexp.tracking import tags as tag

RESUME_KEY = "sweep.resume"


def _without_resume(overrides: Sequence[str]) -> List[str]:
    return [o for o in overrides if o.lstrip("+~").partition("=")[0] != RESUME_KEY]


def command(argv: Sequence[str], sweep_id: str) -> str:
    """The sweep's own command line (`argv`: sys.argv[1:], -m included) with sweep.resume=<id>."""
    keep = _without_resume(argv)
    if not any(a in ("-m", "--multirun") for a in keep):
        keep = ["-m", *keep]
    return " ".join(["python -m distexp", *map(shlex.quote, keep), f"{RESUME_KEY}={sweep_id}"])


def measures(argv: Sequence[str], sweep_dir: Path) -> bool:
    """Whether the sweep measures (repeats=auto or repeats=N >= 2: its decision, auto.json, or
    the command's repeats): then a job it stopped runs again from the start when resumed
    (distexp.sweeps.planning.place), its checkpoint not used."""
    from distexp.sweeps.records import AUTO_FILE

    given = [a.partition("=")[2].strip().lower() for a in argv
             if a.lstrip("+~").partition("=")[0] == "repeats"]
    return (Path(sweep_dir) / AUTO_FILE).exists() or any(
        v == "auto" or (v.isdigit() and int(v) >= 2) for v in given)


def stopped_line(sweep_id: str, sweep_dir: Path, argv: Sequence[str], signal_name: str) -> str:
    """The lines a stopped sweep ends with (without the "distexp: " prefix): the sweep's
    directory and the command on lines of their own, so that each line fits 120 columns."""
    jobs = records(Path(sweep_dir))
    done = sum(1 for j in jobs if j.get("status") == "COMPLETED")
    kept = (f"{done} finished job{'' if done == 1 else 's'} (skipped when resumed) and each "
            "job's checkpoints, in")
    if measures(argv, sweep_dir):  # a measurement: a stopped job's checkpoint is not resumed
        kept = (f"{done} finished job{'' if done == 1 else 's'} (skipped when resumed; a job "
                "stopped before its figures runs again from the start), in")
    again = console_lines.command_lines(command(argv, sweep_id))
    return (f"interrupted by {signal_name}: sweep {sweep_id} stopped\nkept: {kept}"
            f"\n  {sweep_dir}\ncontinue with:\n{again}")


def _same(a: str, b: str) -> bool:
    return sorted(_without_resume(shlex.split(a))) == sorted(_without_resume(shlex.split(b)))


def find(client, experiment: str, overrides: str) -> Optional[str]:
    """The id of the latest KILLED sweep in `experiment` whose parent run's overrides tag is
    `overrides` (order aside), or None."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return None
    query = f"tags.`{tag.RUN_KIND}` = 'sweep' and attributes.status = 'KILLED'"
    for run in client.search_runs([exp.experiment_id], query,
                                  order_by=["attributes.start_time DESC"], max_results=50):
        if _same(run.data.tags.get(tag.OVERRIDES, ""), overrides):
            return run.data.tags.get(tag.SWEEP_ID)
    return None


def announce(config) -> Optional[str]:
    """Before a new sweep starts: one line when the store holds an interrupted sweep of the same
    overrides (its id and the command that continues it); that id, or None. Never stops the
    sweep: a store that cannot answer the search says nothing here."""
    from distexp import tracking

    overrides = tracking.redact_text(" ".join(config.hydra.overrides.task))
    try:
        found = find(tracking.client(config.tracking.uri), config.tracking.experiment, overrides)
    except Exception:  # noqa: BLE001  (the parent run's creation reports a bad store in one line)
        return None
    if found:
        print(f"distexp: sweep {found} with these overrides was interrupted; this command starts "
              f"a new sweep. To continue that one instead:\n"
              f"{console_lines.command_lines(command(sys.argv[1:], found))}", flush=True)
    return found
