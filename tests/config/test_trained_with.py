"""`resume=true` continues only the configuration its checkpoint was trained with (distexp.config.
trained_with, run by the checks in the job process, before TensorFlow): any key but the length
of training that differs is one line naming the keys, received vs the checkpoint's, and the
checkpoint's path; keys that change nothing of what is trained may differ. No TensorFlow: the
checkpoint directory is planted (an index file and the identity file the chief writes)."""
from __future__ import annotations

import json

import pytest

from distexp.config import checks, trained_with
from distexp.errors import UserError

SHORT = ["strategy=one_device", "epochs=2", "steps_per_epoch=3"]


@pytest.fixture
def job(compose, tmp_path, monkeypatch):
    """validate(overrides) as a single run's CLI does; `ck`: a checkpoint dir holding ckpt-6 of
    the default job (SHORT), its identity file recording that job's configuration."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: False)
    ck = tmp_path / "ck"

    def validate(*overrides):
        return checks.validate(compose(*SHORT, f"checkpoint.dir={ck}", *overrides))

    cfg = compose(*SHORT, f"checkpoint.dir={ck}")
    written = trained_with.record(cfg, validate().layout)
    ck.mkdir()
    (ck / "ckpt-3.index").write_bytes(b"x")
    (ck / "ckpt-6.index").write_bytes(b"x")
    (ck / trained_with.IDENTITY).write_text(json.dumps({"model": "cnn", "config": written}))
    validate.ck, validate.written = ck, written
    return validate


def _refused(validate, *overrides) -> str:
    with pytest.raises(UserError) as ex:
        validate(*overrides)
    return str(ex.value)


def test_another_learning_rate_is_one_line_naming_it_and_the_checkpoint(job):
    assert _refused(job, "learning_rate=0.1", "resume=true") == (
        f"learning_rate: received 0.1 with resume=true; the checkpoint {job.ck}/ckpt-6 was "
        "trained with learning_rate=0.003 (a resume continues the same configuration: only epochs "
        "and steps_per_epoch may differ); valid: learning_rate=0.003, another checkpoint.dir, or "
        "resume=false (a fresh start, which replaces it)")


def test_several_keys_are_named_each_with_both_values(job):
    line = _refused(job, "seed=7", "model.optimizer=sgd", "cpu_replicas=2", "strategy=mirrored",
                 "resume=true")
    assert line.startswith("cpu_replicas, model.optimizer, seed, strategy.name: received "
                           "cpu_replicas=2, model.optimizer=sgd, seed=7, strategy.name=mirrored "
                           "(and 2 more keys) with resume=true; the checkpoint "
                           f"{job.ck}/ckpt-6 was trained with cpu_replicas=1, model.optimizer=adam, "
                           "seed=0, strategy.name=one_device ("), line
    # the overrides that give the checkpoint's configuration back (an option by its group)
    assert line.endswith("; valid: cpu_replicas=1 model.optimizer=adam seed=0 strategy=one_device, "
                         "another checkpoint.dir, or resume=false (a fresh start, which replaces "
                         "it)"), line
    # the facts they resolve to come after the keys; alone, they are named too
    assert _refused(job, "global_batch_size=128", "resume=true").startswith(
        "global_batch_size, resolved.global_batch: received global_batch_size=128, "
        "resolved.global_batch=128 with resume=true")


def test_the_length_of_training_and_what_does_not_train_may_differ(job):
    job("epochs=9", "steps_per_epoch=5", "resume=true")
    job("resume=true", "tracking.enabled=false", "progress=quiet", "log_every_steps=2",
        "checkpoint.keep=5", "checkpoint.every_steps=1", "steps_per_execution=3",
        "warmup_steps=0", "measure_step_split=false", "timeout=600", "warm_start=false",
        "dataset.prefetch=2", "target_accuracy=0.5")
    # the model's default rate given by hand is the same rate
    job("learning_rate=0.003", "resume=true")


def test_nothing_is_compared_without_resume_a_checkpoint_or_its_record(job):
    job("learning_rate=0.1")  # a fresh start (the trainer says what it replaces)
    for index in job.ck.glob("ckpt-*.index"):
        index.unlink()
    job("learning_rate=0.1", "resume=true")  # no checkpoint: the trainer starts fresh, says so
    (job.ck / "ckpt-6.index").write_bytes(b"x")
    (job.ck / trained_with.IDENTITY).write_text(json.dumps({"model": "cnn"}))
    job("learning_rate=0.1", "resume=true")  # written before the record: the trainer checks the model


def test_a_key_one_record_lacks_is_not_compared():
    mine = {"seed": "0", "learning_rate": "0.1", "new.key": "3", "epochs": "9"}
    theirs = {"seed": "0", "learning_rate": "0.003", "epochs": "2"}
    assert trained_with.differences(mine, theirs) == [("learning_rate", "0.1", "0.003")]


def test_keep_in_sweeps_applies_to_a_sweep_only(compose, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: False)
    with pytest.raises(UserError, match=r"^checkpoint\.keep_in_sweeps: received true for a single "
                                        r"run; it applies to a sweep only"):
        checks.validate(compose("checkpoint.keep_in_sweeps=true"))
    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: True)
    checks.validate(compose("checkpoint.keep_in_sweeps=true"))


def test_another_model_is_named_by_its_option_not_by_the_keys_that_follow_from_it(job):
    assert _refused(job, "model=mlp", "resume=true") == (  # mlp's min_size differs too: not named
        f"model.name: received mlp with resume=true; the checkpoint {job.ck}/ckpt-6 was trained "
        "with model.name=cnn (a resume continues the same configuration: only epochs and "
        "steps_per_epoch may differ); valid: model=cnn, another checkpoint.dir, or resume=false "
        "(a fresh start, which replaces it)")
