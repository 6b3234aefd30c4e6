"""The sweep's parent run in MLflow: opened when a sweep starts, reopened by `sweep.resume`, and
the tags that make a job's run its child.

The sweep process (distexp.sweeps.callback, ``on_multirun_start``) calls `open_parent` or
`reopen_parent`, which also fill in what sweep.json tells the jobs (the parent's run id, the
redacted tracking URI, the experiment); each job process (distexp.job.lifecycle) reads that file
back through `child_tags`. No TensorFlow here.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict

from omegaconf import DictConfig, OmegaConf

from distexp import errors
from distexp.console_lines import ERROR
from distexp.sweeps.records import SWEEP_FILE
from distexp.tracking import tags as tag


def reopen_parent(config: DictConfig, resume: str, sweep_dir: Path, info: Dict[str, Any]):
    """Reopen the resumed sweep's parent run; (sweep id, run, its status before), info updated."""
    from distexp import tracking
    from distexp.sweeps import planning

    parent = planning.find_parent(config, resume)
    sweep_id = resume
    resumed_status = parent.info.status
    run = tracking.JobRun.reopen(config.tracking.uri, parent.info.run_id)
    run.set_tag(tag.RESUMED_IN, str(sweep_dir))
    info.update(sweep_id=sweep_id, parent_run_id=run.run_id,
                tracking_uri=tracking.redact(config.tracking.uri),
                experiment=config.tracking.experiment, resumes=parent.data.tags.get(tag.SWEEP_DIR))
    print(f"Sweep {sweep_id} (resumed): MLflow parent run {run.run_id} reopened\n"
          f"{_where(tracking.redact(config.tracking.uri), sweep_dir)}", flush=True)
    return sweep_id, run, resumed_status


def open_parent(config: DictConfig, sweep_id: str, sweep_dir: Path, info: Dict[str, Any]):
    """Start a new sweep's parent run (exit 2 if the store refuses it); info updated."""
    from distexp import tracking
    from distexp.errors import UserError

    overrides = tracking.redact_text(" ".join(config.hydra.overrides.task))
    params = {"overrides": overrides or "(none)",
              "sweeper": _target(config, "sweeper"),
              "launcher": _target(config, "launcher")}
    swept = OmegaConf.select(config, "hydra.sweeper.params")
    if swept:
        params["sweeper.params"] = tracking.redact_text(
            json.dumps(OmegaConf.to_container(swept, resolve=False)))
    tags = {tag.SWEEP_ID: sweep_id, tag.RUN_KIND: "sweep", tag.SWEEP_DIR: str(sweep_dir),
            tag.OVERRIDES: overrides}
    try:
        run = tracking.JobRun(config.tracking.uri, config.tracking.experiment,
                              f"sweep-{sweep_id}", {**tags, **tracking.owner_tags()},
                              params)
    except UserError as ex:  # e.g. a server that accepts connections but is no MLflow
        print(f"{ERROR}{ex}", file=sys.stderr, flush=True)
        raise SystemExit(errors.BAD_INPUT) from None
    tracking.end_dead_runs(run.client, [run.experiment_id])
    info.update(parent_run_id=run.run_id, tracking_uri=tracking.redact(config.tracking.uri),
                experiment=config.tracking.experiment)
    print(f"Sweep {sweep_id}: MLflow parent run {run.run_id}\n"
          f"{_where(tracking.redact(config.tracking.uri), sweep_dir)}", flush=True)
    return run


def _where(uri: str, sweep_dir: Path) -> str:
    """The store and the jobs' directory, each on a line of its own (120 columns)."""
    return f"  store: {uri}\n  jobs: {sweep_dir}"


def _target(config: DictConfig, what: str) -> str:
    t = OmegaConf.select(config, f"hydra.{what}._target_") or "?"
    return t.rsplit(".", 1)[-1]


def child_tags(cfg_sweep_dir: str, uri: str, experiment: str, job_num: int) -> Dict[str, str]:
    """Tags that make a job's run a child of its sweep, and its set-up's index and key
    (distexp.sweeps.setups; called by distexp.job.lifecycle in the job process)."""
    try:
        info = json.loads((Path(cfg_sweep_dir).absolute() / SWEEP_FILE).read_text())
    except (OSError, ValueError):
        return {}
    from distexp.sweeps import setups

    tags = {tag.SWEEP_ID: info["sweep_id"], tag.RUN_KIND: "job", tag.JOB_NUM: str(job_num),
            tag.REPEAT: _repeat(), **setups.child_tags(info, job_num)}
    from distexp.tracking.redaction import redact

    if info.get("parent_run_id") and info.get("tracking_uri") == redact(uri) and \
            info.get("experiment") == experiment:
        tags[tag.PARENT_RUN] = info["parent_run_id"]
    return tags


def _repeat() -> str:
    """This job's `repeat` (the sweeper's override; 0 when the job is not repeated)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        for o in HydraConfig.get().overrides.task:
            if o.startswith("repeat="):
                return o.split("=", 1)[1]
    except Exception:  # noqa: BLE001
        pass
    return "0"
