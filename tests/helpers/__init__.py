"""Helpers the test files share, one module per concern (a test file never imports another test
file). No TensorFlow here. Every name is also importable from `helpers` itself.

- `helpers.cli`: the CLI as a user runs it (`run_cli`, a subprocess), or in this process for the
  unit tier (`run_in_process`, `no_process`); a child's environment (`child_env`, `cli_env`)
- `helpers.store`: read an MLflow store (`mlflow_runs`, `db_uri`), or write runs straight into a
  new one (`new_store`, `store_run`, `report_store`, ...: the report's tests)
- `helpers.processes`: what is still running for a job (`processes_mentioning`,
  `processes_with`, `descendants`); `wait_until`; commands started together (`run_together`)
- `helpers.slurm`: the Slurm tests' commands, queue and checks that nothing is left
- `helpers.browser`: headless Chromium on an MLflow UI page (the UI's tests, the screenshot)
- `helpers.fakes`: a clock moved by hand, the real sweeper with a launcher that records its jobs,
  an option of one's own (`plug_in`; `TOY_OPTIONS`: a model and a dataset)
- `helpers.gpus`: a faked NVIDIA driver directory (`fake_driver`), this machine's GPUs faked
  with it (`faked_gpus`, each GPU test file's `gpus` fixture), a sweep job that only holds its
  GPUs from the sweep's pool (`pool_job`)
"""
from helpers.cli import (  # noqa: F401
                         CONF,
                         FAST,
                         PROBES,
                         ROOT,
                         TESTS,
                         USER_CODE,
                         NoProcess,
                         Result,
                         child_env,
                         cli_env,
                         distexp_cmd,
                         finished_job,
                         finished_sweep,
                         no_process,
                         run_cli,
                         run_in_process,
                         run_probe,
)
from helpers.fakes import TOY_OPTIONS, Clock, RecordingLauncher, launched, plug_in, sweeper  # noqa: F401
from helpers.gpus import JOBLIB_LAUNCHER, fake_driver, faked_gpus, pool_job  # noqa: F401
from helpers.processes import (  # noqa: F401
    descendants,
    processes_mentioning,
    processes_with,
    run_together,
    still_running,
    wait_until,
)
from helpers.store import db_uri, job_params, mlflow_runs, new_store, perf_metrics, report_store, store_run  # noqa: F401
