"""Every key of the schema is checked before anything is built: walking the schema (the top-level
Config and every option record's schema) finds each key, and EDGE must hold, for each, a bad or
edge value (with the options it needs) that distexp refuses in one line naming the key, what was
received and what is valid. A key added to the schema without an entry here fails
`test_every_schema_key_has_a_checked_edge_value`."""
from __future__ import annotations

import dataclasses
import typing

import pytest

from distexp import errors
from distexp.config import checks, schema
from distexp.options import groups

# key -> (overrides that give it a bad or edge value, with the options it needs; the line's start).
# The line's start is the key itself unless said otherwise.
EDGE = {
    "batch_size_per_replica": (["batch_size_per_replica=0"],),
    "checkpoint.dir": (["checkpoint.dir=/proc/distexp/ck"],),
    "checkpoint.every_steps": (["checkpoint.every_steps=-1"],),
    "checkpoint.keep": (["checkpoint.keep=0"],),
    "checkpoint.keep_in_sweeps": (["checkpoint.keep_in_sweeps=true"],),
    "cluster.address": (["cluster=ray", "cluster.address=nohostport"],),
    "cluster.cpus": (["cluster=ray", "cluster.cpus=0"],),
    "cluster.placement": (["cluster=ray", "cluster.placement=scatter"],),
    "cluster.start_timeout": (["cluster=ray", "cluster.start_timeout=-1"],),
    "cluster.host": (["strategy=multiworker", "cluster.host=10.1.2.3"],),
    "cluster.name": (["cluster.name=nosuch"], "cluster:"),
    "cluster.peer_start_timeout": (["cluster=slurm", "cluster.peer_start_timeout=0"],),
    "cluster.port": (["strategy=multiworker", "cluster.port=80"],),
    "cluster.record": (["cluster.record=os"],),
    "cpu_replicas": (["cpu_replicas=0"],),
    "dataset.cache": (["dataset=mnist", "dataset.cache=maybe"],),
    "dataset.data_dir": (["dataset=mnist", "dataset.data_dir=/etc/hostname"],),
    "dataset.download": (["dataset=mnist", "dataset.download=maybe"],),
    "dataset.eval_split": (["dataset=mnist", "dataset.eval_split=' '"],),
    "dataset.factory": (["dataset=custom", "dataset.factory=nocolon"],),
    "dataset.image_size": (["dataset=mnist", "dataset.image_size=[0,4]"],),
    "dataset.kwargs": (["dataset=custom", "dataset.factory=m:f", "dataset.kwargs=3"],),
    "dataset.max_length": (["dataset=synthetic_pairs", "model=gru_seq2seq", "dataset.max_length=0"],),
    "dataset.name": (["dataset.name=nosuch"], "dataset:"),
    "dataset.num_classes": (["dataset=synthetic", "dataset.num_classes=1"],),
    "dataset.on_device": (["dataset.on_device=true", "loop=fit"],),
    "dataset.path": (["dataset=text_pairs", "model=gru_seq2seq", "dataset.path=''"],),
    "dataset.prefetch": (["dataset.prefetch=-2"],),
    "dataset.preprocessing": (["dataset=mnist", "dataset.preprocessing=zscore"],),
    "dataset.record": (["dataset.record=os"],),
    "dataset.shape": (["dataset=synthetic", "dataset.shape=[0]"],),
    "dataset.shuffle_buffer": (["dataset.shuffle_buffer=0"],),
    "dataset.size": (["dataset=synthetic", "dataset.size=0"],),
    "dataset.source_tokens": (["dataset=synthetic_pairs", "model=gru_seq2seq",
                               "dataset.source_tokens=bytes"],),
    "dataset.target_tokens": (["dataset=synthetic_pairs", "model=gru_seq2seq",
                               "dataset.target_tokens=bytes"],),
    "dataset.task": (["dataset.task=regression"],),
    "dataset.test_fraction": (["dataset.test_fraction=1.0"],),
    "dataset.tfds_name": (["dataset=tfds", "dataset.tfds_name=''"],),
    "dataset.threadpool": (["dataset.threadpool=-1"],),
    "dataset.train_split": (["dataset=mnist", "dataset.train_split=''"],),
    "dataset.vocab_size": (["dataset=synthetic_pairs", "model=gru_seq2seq", "dataset.vocab_size=2"],),
    "epochs": (["epochs=0"],),
    "global_batch_size": (["global_batch_size=0"],),
    "gpu_replicas": (["gpu_replicas=0"],),
    "gpus": (["gpus=-1"],),
    "jit_compile": (["jit_compile=true", "strategy=mirrored", "cpu_replicas=2", "gpus=0"],),
    "learning_rate": (["learning_rate=0"],),
    "learning_rate_scaling": (["learning_rate_scaling=cubic"],),
    "log_every_steps": (["log_every_steps=-1"],),
    "loop.name": (["loop.name=nosuch"], "loop:"),
    "loop.record": (["loop.record=os"],),
    "measure_peak_flops": (["measure_peak_flops=maybe"],),
    "measure_min_seconds": (["measure_min_seconds=-1"],),
    "measure_min_steps": (["measure_min_steps=-1"],),
    "measure_step_split": (["measure_step_split=maybe"],),
    "model.embedding_dim": (["dataset=synthetic_pairs", "model=gru_seq2seq", "model.embedding_dim=0"],),
    "model.factory": (["model=custom", "model.factory=nocolon"],),
    "model.learning_rate": (["model.learning_rate=0"],),
    "model.min_size": (["model.min_size=-1"],),
    "model.name": (["model.name=nosuch"], "model:"),
    "model.optimizer": (["model.optimizer=adamm"],),
    "model.record": (["model.record=os"],),
    "model.resize": (["model.resize=maybe"],),
    "model.units": (["dataset=synthetic_pairs", "model=gru_seq2seq", "model.units=0"],),
    "objective": (["objective=eval/f1"],),
    "precision": (["precision=float8"],),
    "profile": (["profile=maybe"],),
    "progress": (["progress=bars"],),
    "ps": (["ps=-1"],),
    "repeat": (["repeat=3"],),
    "repeats": (["repeats=0"],),
    "resume": (["resume=true", "loop=fit"],),
    "seed": (["seed=-1"],),
    "steps_per_epoch": (["steps_per_epoch=0"],),
    "steps_per_execution": (["steps_per_execution=0"],),
    "strategy.communication": (["strategy=multiworker", "strategy.communication=mpi"],),
    "strategy.cross_device_ops": (["strategy=mirrored", "strategy.cross_device_ops=nccl2"],),
    "strategy.name": (["strategy.name=nosuch"], "strategy:"),
    "strategy.record": (["strategy.record=os"],),
    "strategy.tpu": (["strategy=one_device", "strategy.tpu=grpc://x:8470"],),
    "strategy.tpu_cores": (["strategy=tpu", "strategy.tpu_cores=0"],),
    "sweep.accuracy_margin": (["sweep.accuracy_margin=0"],),
    "sweep.alpha": (["sweep.alpha=2"],),
    "sweep.controls": (["sweep.controls=true"],),
    "sweep.margin": (["sweep.margin=0.1"],),
    "sweep.max_repeats": (["sweep.max_repeats=1"],),
    "sweep.resume": (["sweep.resume=20261122-221652-b3e381"],),
    "sweep.seed_by_round": (["sweep.seed_by_round=maybe"],),
    "sweep.share_gpus": (["sweep.share_gpus=true"],),
    "target_accuracy": (["target_accuracy=1.5"],),
    "task.factory": (["task.factory=nocolon"],),
    "task.kwargs": (["+task.kwargs.depth=3"],),
    "task.name": (["task.name=regression"],),
    "terminate_on_nan": (["terminate_on_nan=maybe"],),
    "timeout": (["timeout=0"],),
    "tracking.enabled": (["tracking.enabled=maybe"],),
    "tracking.experiment": (["tracking.experiment=''"],),
    "tracking.system_metrics": (["tracking.system_metrics=maybe"],),
    "tracking.system_metrics_interval": (["tracking.system_metrics_interval=0.01"],),
    "tracking.uri": (["tracking.uri=''"],),
    "warm_start": (["warm_start=maybe"],),
    "warmup_steps": (["warmup_steps=-1"],),
    "workers": (["strategy=multiworker", "workers=0"],),
    "xla_step": (["xla_step=fused"],),
}

# Edge values of repeats=auto's keys in a sweep's job (the sweeper runs these checks too): the
# range, not the applicability.
AUTO_EDGE = {"sweep.alpha": ["sweep.alpha=1.0"], "sweep.margin": ["sweep.margin=0"],
             "sweep.max_repeats": ["sweep.max_repeats=1"]}


@pytest.fixture(scope="module")
def compose():
    """Hydra initialised once for the module's ~100 compositions (each then ~0.05 s)."""
    from conftest import CONF
    from hydra import compose as hcompose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    schema.register()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        yield lambda *overrides: hcompose(config_name="config", overrides=list(overrides))
    GlobalHydra.instance().clear()


def _fields(cls, prefix: str = ""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name == "resolved" or (not prefix and f.name in groups.GROUPS):
            continue  # written by the job, not set; a group's keys come from its options
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            yield prefix + f.name


def schema_keys() -> set:
    keys = set(_fields(schema.Config)) | {f"loop.{k}" for k in _fields(schema.LoopConfig)}
    for group, module in groups.GROUPS.items():
        for rec in module.REGISTRY.values():
            option = getattr(rec, "schema", None)
            if option is not None and dataclasses.is_dataclass(option):
                keys |= {f"{group}.{k}" for k in _fields(option)}
    return keys


def test_every_schema_key_has_a_checked_edge_value():
    keys = schema_keys()
    assert len(keys) > 90
    assert sorted(keys - set(EDGE)) == [], "schema keys without a checked edge value in EDGE"
    assert sorted(set(EDGE) - keys) == [], "EDGE names keys the schema no longer has"


def _refusal(compose, overrides, job_dir=None) -> str:
    """The one line distexp says for these overrides (composition, checks, the cluster's plan),
    or ''."""
    from distexp.cluster import kinds

    try:
        cfg = compose(*overrides)
        checks.validate(cfg)
        if job_dir is not None:
            kinds.plan(cfg, job_dir, 0, 0)
    except Exception as ex:  # noqa: BLE001  (what the CLI turns into its line: errors.one_line)
        line = errors.one_line(ex)
        assert line is not None, f"{overrides}: not a one-line user error: {ex!r}"
        return line
    return ""


@pytest.mark.parametrize("key", sorted(EDGE))
def test_a_bad_or_edge_value_of_every_key_is_one_line_naming_it(compose, key, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default checkpoint dir is probed under the cwd
    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: False)  # a single job's CLI
    overrides, *start = EDGE[key]
    line = _refusal(compose, overrides, tmp_path)
    assert "\n" not in line
    assert line.startswith(start[0] if start else f"{key}:"), (overrides, line)
    if not start:  # what was received, and what is valid (or what to do instead)
        assert "received" in line, line
        assert any(w in line for w in ("valid", "expected", "applies", "did you mean", "needs",
                                       "use ", "set ")), line


@pytest.mark.parametrize("key", sorted(AUTO_EDGE))
def test_repeats_auto_keys_are_range_checked_in_a_sweeps_job(compose, key, monkeypatch):
    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: True)
    line = _refusal(compose, ["repeats=auto", *AUTO_EDGE[key]])
    assert line.startswith(f"{key}: received ") and "expected" in line, line


def test_repeats_auto_takes_a_disturbed_rounds_rerun_as_a_repeat(compose, monkeypatch):
    """repeats=auto re-runs a disturbed round once (distexp.sweeps.auto): its jobs take the next
    `repeat`, up to 2 x sweep.max_repeats - 1; a sweep checks every job (and its re-runs' jobs)."""
    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: True)
    auto = ["repeats=auto", "sweep.max_repeats=2"]
    assert _refusal(compose, [*auto, "repeat=2"]) == _refusal(compose, [*auto, "repeat=3"]) == ""
    assert _refusal(compose, [*auto, "repeat=4"]) == (
        "repeat: received 4; expected 0..3 (repeats=auto); the sweeper sets it, set repeats=N instead")
    assert _refusal(compose, ["repeats=2", "repeat=2"]).startswith("repeat: received 2; expected 0..1")


def test_a_record_with_a_built_in_option_is_refused_and_with_its_own_option_not(compose):
    assert _refusal(compose, ["model=cnn", "model.record=my_pkg.models"]) == (
        "model.record: received 'my_pkg.models' with model=cnn, a built-in option that does not "
        "use it; valid: null, or model=<the name the record's module registers>")


def test_unknown_keys_and_options_name_the_nearest_valid_one(compose):
    assert _refusal(compose, ["+epoch=3"]).startswith(
        "epoch: unknown key (not in the schema) (did you mean epochs?)")
    assert "(did you mean model.units?)" in _refusal(compose, ["model=gru_seq2seq",
                                                               "+model.unit=3"])
    assert _refusal(compose, ["model=cnnn"]).startswith("model: received 'cnnn' (did you mean cnn?)")
    assert "did you mean" not in _refusal(compose, ["+zzzz=3"])
