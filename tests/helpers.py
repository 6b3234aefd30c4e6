"""Helpers the test files share (imported as `from helpers import ...`; a test file never imports
another test file). No TensorFlow here.

- `run_cli`: the CLI as a user runs it, a subprocess in a directory (tiers integration and slow)
- `run_in_process`: the same CLI entry point called in this process, for the unit tier: compose
  -> checks -> the one line, with no process started (`NoProcess` fails a test that would start one)
- `mlflow_runs`, `db_uri`: read a store; `new_store` (a copy of an empty one), `store_run`,
  `job_params`, `perf_metrics`, `report_store`: write runs straight into one (the report's tests)
- `processes_mentioning`, `processes_with`: what is still running for a job (nothing may be left)
- `Clock`: a fake clock for the throughput arithmetic
- `plug_in`: an option of one's own (a record's module and its yaml) in a temporary directory
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "distexp" / "conf"

# Small, fast jobs: digits, few epochs, little output.
FAST = ["epochs=2", "warmup_steps=2"]


class Result:
    def __init__(self, returncode, stdout: str, stderr: str, cwd: Path):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.cwd = cwd

    @property
    def out(self) -> str:
        return self.stdout + self.stderr

    def __repr__(self) -> str:
        return f"<exit {self.returncode}>\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


def plug_in(tmp_path: Path, monkeypatch, group: str, option: str, module: str,
            source: str) -> str:
    """Write `source` as the importable module `module` and `conf/<group>/<option>.yaml` naming it
    (`record: module`), both under `tmp_path`; returns the override that adds that conf dir to
    Hydra's search path. The caller unregisters the record and drops the module afterwards."""
    import textwrap

    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / f"{module}.py").write_text(textwrap.dedent(source))
    conf = tmp_path / "conf" / group
    conf.mkdir(parents=True, exist_ok=True)
    (conf / f"{option}.yaml").write_text(f"name: {option}\nrecord: {module}\n")
    monkeypatch.syspath_prepend(str(pkg))
    return f"hydra.searchpath=[file://{tmp_path / 'conf'}]"


def run_cli(args, cwd: Path, module: str = "distexp", timeout: float = 600, env=None) -> Result:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), e.get("PYTHONPATH", "")])
    e.pop("HYDRA_FULL_ERROR", None)
    if env:
        e.update(env)
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr, cwd)


class NoProcess(AssertionError):
    """Raised when code under a unit test tries to start a process."""


@contextlib.contextmanager
def no_process():
    """Any subprocess started inside raises NoProcess (the unit tier starts none). Yields the list
    of the refused commands, so that a caller whose code swallowed the error still sees them."""
    real = subprocess.Popen.__init__
    refused = []

    def refuse(self, args, *a, **kw):
        refused.append(args)
        raise NoProcess(f"a process would start here: {args!r} (the unit tier starts none; "
                        "mark the test integration or slow)")

    subprocess.Popen.__init__ = refuse
    try:
        yield refused
    finally:
        subprocess.Popen.__init__ = real
    if refused:
        raise NoProcess(f"a process would have started: {refused[0]!r}")


def run_in_process(args, cwd: Path, env=None, module: str = "distexp") -> Result:
    """`python -m distexp ARGS` called in this process (distexp.__main__.cli, or the report's
    main), from `cwd`, with `env` on top of os.environ; stdout/stderr captured, the exit code from
    its SystemExit. The process state it touches (cwd, argv, environ, Hydra's singleton, the root
    logger) is put back afterwards. Starting a process raises NoProcess."""
    from hydra.core.global_hydra import GlobalHydra

    saved_env, saved_argv, saved_cwd = dict(os.environ), list(sys.argv), os.getcwd()
    root = logging.getLogger()
    saved_log = (list(root.handlers), root.level)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        os.environ.pop("HYDRA_FULL_ERROR", None)
        os.environ.update(env or {})
        os.chdir(cwd)
        sys.argv = [f"python -m {module}", *args]
        with no_process(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                if module == "distexp":
                    from distexp.__main__ import cli

                    cli()
                else:
                    from distexp.report.cli import main

                    code = main(list(args))
            except SystemExit as ex:
                code = ex.code if isinstance(ex.code, int) else (0 if ex.code is None else 1)
    finally:
        GlobalHydra.instance().clear()
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        root.handlers[:] = saved_log[0]
        root.setLevel(saved_log[1])
    return Result(code, out.getvalue(), err.getvalue(), Path(cwd))


def db_uri(path: Path) -> str:
    return f"sqlite:///{path / 'mlflow.db'}"


def mlflow_runs(uri: str, experiment: str = "distexp"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return client, []
    return client, client.search_runs([exp.experiment_id], max_results=1000)


def processes_mentioning(text: str):
    """PIDs whose command line contains `text` (the job's unique directory)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmd:
            pids.append(int(d.name))
    return pids


def processes_with(text: str, cmd_part: bytes, env_part: bytes = b""):
    """PIDs mentioning `text` whose command line holds `cmd_part` and environment `env_part`."""
    pids = []
    for pid in processes_mentioning(text):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        # a warm-forked trainer names its task in its command line, "(DISTEXP_TASK=worker-1)"
        # (distexp.train.warm): its environ is the warm trainer's
        in_title = b"(" + env_part.rstrip(b"\0") + b")" in cmd
        if cmd_part in cmd and (env_part in env or in_title):
            pids.append(pid)
    return pids


# --- runs written straight into a store (the report's tests) -----------------------------------

def store_run(client, exp, name, status, params, metrics, tags, loss=()):
    from mlflow.entities import Metric, Param

    run = client.create_run(exp, run_name=name, tags=tags)
    rid = run.info.run_id
    client.log_batch(rid, params=[Param(k, str(v)) for k, v in params.items()],
                     metrics=[Metric(k, v, 1000, 1) for k, v in metrics.items()])
    for step, value in loss:
        client.log_metric(rid, "train/loss", value, step=step)
    client.set_terminated(rid, status)
    return rid


def report_store(tmp_path):
    """A sweep s1 of five jobs (one failed, one of another model) and a run of another sweep,
    written straight into a new store: (client, uri, parent run id, sweep dir)."""
    client, uri = new_store(tmp_path)
    exp = client.create_experiment("distexp", artifact_location=(tmp_path / "art").as_uri())
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    parent = client.create_run(exp, run_name="sweep-s1", tags={
        "distexp.sweep_id": "s1", "distexp.run_kind": "sweep", "distexp.sweep_dir": str(sweep_dir)})
    pid = parent.info.run_id
    tags = lambda n: {"distexp.sweep_id": "s1", "distexp.run_kind": "job",  # noqa: E731
                      "mlflow.parentRunId": pid, "distexp.job_num": str(n)}
    store_run(client, exp, "one_device-r1", "FINISHED", job_params("one_device", 1, 64), perf_metrics(1000.0, 30.0),
         tags(0), loss=[(1, 2.0), (2, 1.5), (2, 1.5)])
    store_run(client, exp, "mirrored-r2", "FINISHED", job_params("mirrored", 2, 128), perf_metrics(1800.0, 40.0),
         tags(1), loss=[(1, 2.1), (2, 1.4)])
    store_run(client, exp, "central-r2", "FINISHED", job_params("central", 2, 128), perf_metrics(1500.0, 0.0), tags(2))
    store_run(client, exp, "mirrored-r4", "FAILED", job_params("mirrored", 4, 256), {}, tags(3))
    store_run(client, exp, "resnet-r2", "FINISHED", job_params("mirrored", 2, 128, model="resnet50"),
         perf_metrics(90.0, 5.0), tags(4))
    # another sweep's run and an older sweep: must not be picked up
    client.create_run(exp, run_name="old", tags={"distexp.sweep_id": "s0",
                                                 "distexp.run_kind": "job"})
    client.set_terminated(pid, "FINISHED")
    return client, uri, pid, sweep_dir


_TEMPLATE: list = []


def new_store(directory: Path, name: str = "mlflow.db"):
    """(client, uri) of a new, empty MLflow SQLite store in `directory`: a copy of one made once
    per test process (MLflow's schema migrations take seconds per new store)."""
    import atexit
    import shutil
    import tempfile

    from mlflow.tracking import MlflowClient

    if not _TEMPLATE:
        tmp = Path(tempfile.mkdtemp(prefix="distexp-store-"))
        atexit.register(shutil.rmtree, tmp, True)
        MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}").search_experiments()
        _TEMPLATE.append(tmp / "mlflow.db")
    shutil.copyfile(_TEMPLATE[0], Path(directory) / name)
    uri = f"sqlite:///{Path(directory) / name}"
    return MlflowClient(tracking_uri=uri), uri


def job_params(strategy, replicas, gb, model="cnn", workers=1):
    return {"strategy.name": strategy, "model.name": model, "dataset.name": "synthetic",
            "loop.name": "custom", "num_replicas": replicas, "num_workers": workers,
            "global_batch_size": gb}


def perf_metrics(rate, ci, acc=0.5, ttfs=7.0):
    return {"perf/examples_per_sec": rate, "perf/examples_per_sec_ci95": ci,
            "eval/accuracy": acc, "perf/time_to_first_step_s": ttfs}


class Clock:
    """A fake clock: `t` is what time.perf_counter returns (tests move it by hand)."""

    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def wait_until(cond, timeout: float, what: str, every: float = 0.2):
    """cond()'s first true value within `timeout` seconds, else an AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def cli_env(**extra) -> dict:
    """The environment of a CLI child that must import distexp and tests/factories from here."""
    return dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'tests'}", TF_CPP_MIN_LOG_LEVEL="3",
                **extra)


def distexp_cmd(*args) -> list:
    return [sys.executable, "-m", "distexp", *args]


class RecordingLauncher:
    def __init__(self):
        self.launched = []

    def launch(self, job_overrides, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus

        out = []
        for i, overrides in enumerate(job_overrides):
            self.launched.append((initial_job_idx + i, list(overrides)))
            ret = JobReturn(overrides=list(overrides), _return_value=0.5)
            ret.status = JobStatus.COMPLETED
            out.append(ret)
        return out


def sweeper(tmp_path, *overrides):
    """The real DistexpSweeper on the composed config, its launcher recording the jobs."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import HydraContext

    from distexp.config import schema

    schema.register()
    from hydra_plugins.distexp_sweeper.distexp_sweeper import DistexpSweeper

    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="config", overrides=[*overrides, f"hydra.sweep.dir={tmp_path}"],
                      return_hydra_config=True)
        params = cfg.hydra.sweeper.params
        sweeper = DistexpSweeper(max_batch_size=None, params=dict(params) if params else None)
        sweeper.config = cfg
        sweeper.hydra_context = HydraContext(
            config_loader=GlobalHydra.instance().config_loader(), callbacks=None)
        sweeper.launcher = RecordingLauncher()
    return sweeper
