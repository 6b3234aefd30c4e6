"""`hydra/launcher=slurm`: Hydra's submitit Slurm launcher with what distexp's jobs need.

- Tasks follow the job: a `cluster=slurm` job of multiworker or ps gets one Slurm task per
  process of its cluster (`workers`; for ps also `ps` + 1 coordinator) unless
  `hydra.launcher.tasks_per_node` is set; any other job is one task (it starts its own training
  processes on the node). Jobs needing different task counts are submitted as separate arrays.
- A request no node can ever hold (CPUs or memory per node, as `sinfo` reports the nodes) is one
  line before anything is submitted; a submission sbatch refuses is one line too.
- Ctrl-C or SIGTERM while the sweep waits: `scancel` of every submitted job; the running jobs'
  job processes get Slurm's SIGTERM and end their runs KILLED; once the jobs are gone any child
  run still RUNNING is ended KILLED here, and the parent run ends KILLED (distexp.__main__).
- A job that Slurm ended without a result (cancelled, node failure, out of memory) is a failed job
  of the sweep, not a traceback that loses the other jobs.

Hydra loads launchers only from the `hydra_plugins` package: the class and its config schema
(`hydra/launcher/distexp_slurm`) are in `hydra_plugins/distexp_slurm_launcher/`, the logic here,
the defaults in `conf/hydra/launcher/slurm.yaml`.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from distexp import stops
from distexp.errors import UserError
from distexp.tracking import tags as tag

CANCEL_WAIT_S = 90.0  # Slurm's KillWait (30 s here) plus the job processes closing their runs


def job_tasks(cfg, nodes: int) -> int:
    """Tasks per node for one job: a Slurm task per cluster process for cluster=slurm."""
    from distexp import strategies
    from distexp.cluster import kinds

    n = kinds.of(cfg).srun_tasks(cfg, strategies.of(cfg))
    if n is None:
        return 1
    if n % nodes:
        raise UserError(f"hydra.launcher.nodes: received {nodes}; strategy={cfg.strategy.name} "
                        f"workers={cfg.workers} needs {n} Slurm tasks, which do not split evenly "
                        f"over {nodes} nodes: set nodes to a divisor of {n} or change workers")
    return n // nodes


def largest_node(partition: Optional[str]) -> Optional[Dict[str, Any]]:
    """The most CPUs and memory (MB) any node of `partition` has, from sinfo; None without sinfo."""
    if shutil.which("sinfo") is None:
        return None
    cmd = ["sinfo", "-h", "-N", "-o", "%N %c %m"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return None
    nodes = [line.split() for line in out if len(line.split()) == 3]
    if not nodes:
        return None
    return {"cpus": max(int(n[1].rstrip("+")) for n in nodes),
            "mem_mb": max(int(n[2].rstrip("+")) for n in nodes if n[2].rstrip("+").isdigit()),
            "nodes": len(nodes)}


def check_fits(params: Dict[str, Any], tasks: int, what: str) -> None:
    """One line if no node can ever run `tasks` tasks of this request (it would pend forever)."""
    node = largest_node(params.get("partition"))
    if node is None:
        return
    cpus = tasks * (params.get("cpus_per_task") or 1)
    mem = params.get("mem_gb")
    where = f"partition {params['partition']}" if params.get("partition") else "the cluster"
    if cpus > node["cpus"]:
        raise UserError(f"hydra.launcher.cpus_per_task: received {params.get('cpus_per_task')}; "
                        f"{what} runs {tasks} task(s) per node, i.e. {cpus} CPUs, and the largest "
                        f"node of {where} has {node['cpus']} (sinfo): the job would pend forever. "
                        "Set hydra.launcher.cpus_per_task="
                        f"{max(1, node['cpus'] // tasks)} or fewer workers")
    if mem and mem * 1024 > node["mem_mb"]:
        raise UserError(f"hydra.launcher.mem_gb: received {mem}; the largest node of {where} has "
                        f"{node['mem_mb']} MB (sinfo): the job would pend forever. Set "
                        f"hydra.launcher.mem_gb={node['mem_mb'] // 1024} or less (null = Slurm's "
                        "default)")
    if params.get("nodes", 1) > node["nodes"]:
        raise UserError(f"hydra.launcher.nodes: received {params['nodes']}; {where} has "
                        f"{node['nodes']} node(s) (sinfo)")


def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
    """SlurmLauncher.launch (`self`: the launcher): see the module docstring."""
    import submitit
    from hydra.core.singleton import Singleton
    from hydra.core.utils import filter_overrides
    from omegaconf import OmegaConf

    from distexp.tracking.redaction import redact_text
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    params = dict(self.params)
    sweep_dir = Path(str(self.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    fixed = params.pop("tasks_per_node", None)
    nodes = int(params.get("nodes") or 1)
    groups: Dict[int, List[int]] = {}
    for i, overrides in enumerate(job_overrides):
        tasks = fixed
        if tasks is None:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            tasks = job_tasks(cfg, nodes)
        what = f"job {initial_job_idx + i} [{redact_text(' '.join(filter_overrides(overrides)))}]"
        check_fits(params, tasks, what)
        groups.setdefault(tasks, []).append(i)

    base = set(OmegaConf.structured(BaseQueueConf).keys())
    init_keys = {"submitit_folder", "max_num_timeout"}
    sbatch = {k if k in base else f"slurm_{k}": v for k, v in params.items() if k not in init_keys}
    jobs: Dict[int, Any] = {}
    with _interrupt_cancels(jobs.values, sweep_dir):
        for tasks, idxs in groups.items():
            ex = submitit.AutoExecutor(cluster="slurm", folder=params["submitit_folder"],
                                       slurm_max_num_timeout=params.get("max_num_timeout", 0))
            ex.update_parameters(**sbatch, tasks_per_node=tasks)
            args = [(list(job_overrides[i]), "hydra.sweep.dir", initial_job_idx + i,
                     f"job_id_for_{initial_job_idx + i}", Singleton.get_state()) for i in idxs]
            for i, a in zip(idxs, args):
                print(f"\t#{a[2]} : {redact_text(' '.join(filter_overrides(a[0])))} ({tasks} task(s) per "
                      "node)", flush=True)
            jobs.update(zip(idxs, _submit(ex, self, args)))
        return [_result(jobs[i], initial_job_idx + i, job_overrides[i], sweep_dir)
                for i in range(len(job_overrides))]


# sbatch errors of the controller's connection, not of the request: the submission is retried
# (sbatch submits an array whole or not at all, so nothing is submitted twice). Not "Insane message
# length": that is a client whose slurm.conf names a controller it cannot talk to (seen in CI when
# the two-node test cluster had replaced the one-node one under a running test); it never passes.
TRANSIENT = ("Socket timed out", "Unable to contact slurm controller",
             "Zero Bytes were transmitted or received", "Resource temporarily unavailable")
ATTEMPTS = 3


def _submit(ex, launcher, args):
    """ex.map_array(launcher, args...), retried after a transient sbatch error (2 s apart);
    a refusal (a bad partition, account, size) is one UserError line with sbatch's reason."""
    import submitit

    for attempt in range(1, ATTEMPTS + 1):
        try:
            return ex.map_array(launcher, *zip(*args))
        except (submitit.core.utils.FailedJobError, subprocess.CalledProcessError,
                submitit.core.utils.FailedSubmissionError) as err:
            reason = _last_line(err)
            if attempt < ATTEMPTS and any(t in str(err) for t in TRANSIENT):
                print(f"distexp: sbatch failed ({reason}); submitting again", flush=True)
                time.sleep(2.0)
                continue
            raise UserError(f"hydra.launcher: sbatch refused the job(s): {reason}") from None


def _result(job, num: int, overrides, sweep_dir: Path):
    """The job's JobReturn; a job Slurm ended without one is a failed job of the sweep."""
    from hydra.core.utils import JobReturn, JobStatus
    from submitit.core.utils import UncompletedJobError

    try:
        return job.results()[0]
    except UncompletedJobError as ex:
        state = job.state
        err = RuntimeError(f"Slurm job {job.job_id} ended {state} without a result "
                           f"({_last_line(ex)}); its log: {job.paths.stderr}")
        _record_failed(sweep_dir, num, list(overrides), str(err))
        return JobReturn(overrides=list(overrides), status=JobStatus.FAILED,
                         _return_value=err)


def _last_line(ex: BaseException) -> str:
    lines = [ln.strip() for ln in str(ex).splitlines() if ln.strip()]
    return lines[-1] if lines else type(ex).__name__


def _record_failed(sweep_dir: Path, num: int, overrides: List[str], error: str) -> None:
    """The sweep record the job's own callback could not write (distexp.sweeps reads them)."""
    from distexp.sweeps.records import write_record

    write_record(sweep_dir.absolute(), {"num": num, "overrides": overrides, "status": "FAILED",
                                        "value": None, "error": error[:500],
                                        "job_dir": str(sweep_dir / str(num))}, if_absent=True)


class _interrupt_cancels:
    """While the sweep submits and waits: SIGTERM behaves as Ctrl-C, and either cancels every
    submitted job (scancel), waits until Slurm has ended them, and ends their runs KILLED."""

    def __init__(self, jobs, sweep_dir: Path):
        self.jobs, self.sweep_dir, self.old = jobs, sweep_dir, None

    def __enter__(self):
        self.old = stops.sigterm_as_ctrl_c()
        return self

    def __exit__(self, kind, ex, tb):
        stops.restore(self.old)
        if kind is None or not issubclass(kind, KeyboardInterrupt):
            return False
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the clean-up
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            cancel(list(self.jobs()), self.sweep_dir)
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return False


def cancel(jobs, sweep_dir: Path) -> None:
    ids = [j.job_id for j in jobs]
    if not ids:
        return
    print(f"distexp: interrupted: cancelling Slurm job(s) {', '.join(ids)}", flush=True)
    subprocess.run(["scancel", *ids], capture_output=True)
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)], capture_output=True,
                             text=True).stdout.split()
        if not out:
            break
        time.sleep(0.5)
    else:
        print(f"distexp: Slurm job(s) {', '.join(ids)} still in the queue after "
              f"{CANCEL_WAIT_S:g} s", flush=True)
    _end_running_children(sweep_dir)


def _end_running_children(sweep_dir: Path) -> None:
    """Child runs of this sweep still RUNNING once Slurm ended their jobs (killed before they
    could close them): ended KILLED, so no run is left RUNNING."""
    from distexp.sweeps import ending
    from distexp.sweeps.records import SWEEP_FILE

    try:
        info = json.loads((sweep_dir.absolute() / SWEEP_FILE).read_text())
    except (OSError, ValueError):
        return
    if not info.get("tracking_uri"):
        return
    from distexp.tracking import lookup, store

    client = store.client(ending.current().tracking_uri() or info["tracking_uri"])
    exp = client.get_experiment_by_name(info["experiment"])
    if exp is None:
        return
    runs = lookup.sweep_jobs(client, exp.experiment_id, info["sweep_id"], status="RUNNING")
    for r in runs:
        client.set_terminated(r.info.run_id, "KILLED")
        print(f"distexp: run {r.info.run_id} (job {r.data.tags.get(tag.JOB_NUM, '?')}) "
              "ended KILLED", flush=True)

