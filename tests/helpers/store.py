"""MLflow stores for tests: read one (`mlflow_runs`, `db_uri`); write runs straight into a new
one (`new_store`, a copy of an empty store; `store_run`, `job_params`, `perf_metrics`;
`report_store`, a whole sweep for the report's tests). No TensorFlow here."""
from __future__ import annotations

from pathlib import Path


def db_uri(path: Path) -> str:
    return f"sqlite:///{path / 'mlflow.db'}"


def mlflow_runs(uri: str, experiment: str = "distexp"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return client, []
    return client, client.search_runs([exp.experiment_id], max_results=1000)


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


def empty_store(path: Path) -> None:
    """An empty MLflow SQLite store at `path` (its tables made): a copy of one made once per test
    process. MLflow's schema migrations take ~1.2 s of CPU per new store, which every test that
    trains through the CLI paid (run_cli: a user's outputs/mlflow.db after their first command)."""
    import atexit
    import shutil
    import tempfile

    if not _TEMPLATE:
        from mlflow.tracking import MlflowClient

        tmp = Path(tempfile.mkdtemp(prefix="distexp-store-"))
        atexit.register(shutil.rmtree, tmp, True)
        MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}").search_experiments()
        _TEMPLATE.append(tmp / "mlflow.db")
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_TEMPLATE[0], path)


def new_store(directory: Path, name: str = "mlflow.db"):
    """(client, uri) of a new, empty MLflow SQLite store in `directory` (empty_store)."""
    from mlflow.tracking import MlflowClient

    empty_store(Path(directory) / name)
    uri = f"sqlite:///{Path(directory) / name}"
    return MlflowClient(tracking_uri=uri), uri


def job_params(strategy, replicas, gb, model="cnn", workers=1):
    return {"strategy.name": strategy, "model.name": model, "dataset.name": "synthetic",
            "loop.name": "custom", "num_replicas": replicas, "num_workers": workers,
            "global_batch_size": gb}


def perf_metrics(rate, ci, acc=0.5, ttfs=7.0):
    return {"perf/examples_per_sec": rate, "perf/examples_per_sec_ci95": ci,
            "eval/accuracy": acc, "perf/time_to_first_step_s": ttfs}
