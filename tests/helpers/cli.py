"""The CLI as a user runs it, and the environment of a child that must import distexp (no
TensorFlow here).

- `run_cli`: `python -m distexp ARGS` as a subprocess in a directory (tiers integration and slow)
- `run_in_process`: the same entry point called in this process, for the unit tier: compose ->
  checks -> the one line, with no process started (`no_process` fails a test that would start one)
- `child_env`, `cli_env`, `distexp_cmd`: what a test needs to start such a child itself
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "distexp" / "conf"
TESTS = ROOT / "tests"
# modules a test's child imports by their top-level name: a user's factories (user_code/:
# `model.factory=factories:small_mlp`) and the probe scripts (probes/: run by path or `-m`).
# child_env puts them on PYTHONPATH, conftest.py on this process's sys.path.
USER_CODE = TESTS / "helpers" / "user_code"
PROBES = TESTS / "helpers" / "probes"

# Small, fast jobs: digits, few epochs, little output.
FAST = ["epochs=2", "warmup_steps=2"]


def child_env(*, tests: bool = True, **extra) -> dict:
    """This process's environment for a child that imports distexp from this checkout (and, with
    `tests`, the modules in tests/ and USER_CODE, PROBES: factories, probes): PYTHONPATH starts with the checkout, and
    HYDRA_FULL_ERROR is dropped (a user's one line, not Hydra's traceback). `extra` goes on top."""
    e = dict(os.environ)
    e.pop("HYDRA_FULL_ERROR", None)
    paths = [str(ROOT), *([str(TESTS), str(USER_CODE), str(PROBES)] if tests else []),
             e.get("PYTHONPATH", "")]
    e["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    e.update(extra)
    return e


class Result:
    def __init__(self, returncode, stdout: str, stderr: str, cwd: Path):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.cwd = cwd

    @property
    def out(self) -> str:
        return self.stdout + self.stderr

    def refused(self) -> list:
        """A command refused as bad input (exit 2, no traceback): its stderr's lines, the blank
        ones left out (the refusal is one line: the caller compares them)."""
        assert self.returncode == 2, self
        assert "Traceback" not in self.out, self
        return [ln for ln in self.stderr.splitlines() if ln.strip()]

    def __repr__(self) -> str:
        return f"<exit {self.returncode}>\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


def run_cli(args, cwd: Path, module: str = "distexp", timeout: float = 600, env=None,
            store: bool = True) -> Result:
    """`python -m MODULE ARGS` in `cwd`. `store`: `python -m distexp` finds its default store
    (outputs/mlflow.db) already made, as after a user's first command (a copy of an empty one:
    helpers.store.empty_store), unless it exists; False for a test of what the command creates."""
    default = Path(cwd) / "outputs" / "mlflow.db"
    if store and module == "distexp" and not default.exists():
        from helpers.store import empty_store

        empty_store(default)
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd,
                          env=child_env(**(env or {})), capture_output=True, text=True,
                          timeout=timeout)
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


def run_probe(script: str, *args, tests: bool = True, timeout: float = 300, **env) -> dict:
    """`python tests/helpers/probes/SCRIPT ARGS`, a probe that prints its figures as one JSON line last: that
    line, parsed (a failed probe fails the test with its stderr). `env` goes on top of
    child_env's."""
    p = subprocess.run([sys.executable, str(PROBES / script), *map(str, args)],
                       env=child_env(tests=tests, **env), capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def finished_job(cli, name: str, *args):
    """(job dir, result) of a job run by the `cli` fixture in cli.cwd/NAME, tracking off; it must
    exit 0."""
    job = cli.cwd / name
    r = cli(f"hydra.run.dir={job}", "tracking.enabled=false", *args)
    assert r.returncode == 0, r
    return job, r


def finished_sweep(cwd: Path, name: str, *args, timeout: float = 900, env=None):
    """(jobs, result) of `python -m distexp -m ARGS` run in `cwd` into the sweep dir cwd/NAME,
    tracking off; it must exit 0. `jobs`: {the values of the swept keys, in the order the sweep
    names them (sweep.json's `swept`): that job's dir}. One sweep trains its jobs in one warm
    process (TensorFlow imported once), where one command per job pays the import each time: the
    slow tier's way of training several jobs that are checked one by one."""
    sweep = cwd / name
    r = run_cli(["-m", f"hydra.sweep.dir={sweep}", "tracking.enabled=false", *args], cwd,
                timeout=timeout, env=env)
    assert r.returncode == 0, r
    swept = json.loads((sweep / "sweep.json").read_text())["swept"]
    jobs = {}
    for job in sorted(p for p in sweep.iterdir() if (p / "overrides.yaml").is_file()):
        given = _overrides(job / "overrides.yaml")
        jobs[tuple(given[k] for k in swept)] = job
    return jobs, r


def _overrides(path: Path) -> dict:
    """{key: value as str} of a job's overrides.yaml, parsed by Hydra (which escapes `:`)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    lines = [str(x) for x in OmegaConf.load(path)]
    return {o.key_or_group: str(o.value()) for o in OverridesParser.create().parse_overrides(lines)}


def cli_env(**extra) -> dict:
    """The environment of a CLI child that must import distexp and the test factories (USER_CODE) from here."""
    return child_env(TF_CPP_MIN_LOG_LEVEL="3", **extra)


def distexp_cmd(*args) -> list:
    return [sys.executable, "-m", "distexp", *args]


# `python -c TRAIN_SCRIPT CONF_DIR JOB_DIR OVERRIDES...`: distexp.train.trainer.train(cfg) called as a
# plain function (composed, checked and resolved as the job process would), its result printed
# after "RESULT ".
TRAIN_SCRIPT = """
import json, sys
from hydra import compose, initialize_config_dir
from distexp.config import checks, resolved, schema
from distexp.train.trainer import train

schema.register()
with initialize_config_dir(version_base="1.3", config_dir=sys.argv[1]):
    cfg = compose(config_name="config", overrides=sys.argv[3:])
checks.validate(cfg)
resolved.attach(cfg, resolved.resolve(cfg, job_dir=sys.argv[2]))
print("RESULT " + json.dumps(train(cfg)))
"""
