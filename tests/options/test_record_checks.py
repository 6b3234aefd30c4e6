"""An option's keys are checked by its record (Dataset.check, Model.check, Kind.check: the keys
every option of the group has in the base, a subclass's own after), called with the option's node
alone, before TensorFlow: one line naming the key."""
from __future__ import annotations

import pytest

from distexp import errors
from distexp.cluster import kinds
from distexp.options import datasets, models


@pytest.mark.parametrize("overrides, said", [
    (["dataset.shuffle_buffer=0"], "dataset.shuffle_buffer: received 0; expected >= 1"),
    (["dataset.prefetch=-2"], "dataset.prefetch: received -2; expected >= -1"),
    (["dataset.threadpool=-1"], "dataset.threadpool: received -1; expected >= 0"),
    (["dataset=synthetic", "dataset.num_classes=1"], "dataset.num_classes: received 1; expected >= 2"),
    (["dataset=mnist", "dataset.train_split=' '"], "dataset.train_split: received ' '; expected a TFDS split"),
    (["dataset=digits", "dataset.test_fraction=1.5"], "dataset.test_fraction: received 1.5"),
])
def test_a_datasets_record_checks_its_keys(compose, overrides, said):
    cfg = compose(*overrides)
    with pytest.raises(errors.UserError) as ex:
        datasets.of(cfg).check(cfg.dataset)
    assert str(ex.value).startswith(said)


@pytest.mark.parametrize("overrides, said", [
    (["model.min_size=-1"], "model.min_size: received -1; expected >= 0"),
    (["model.learning_rate=0"], "model.learning_rate: received 0.0; expected > 0"),
    (["model.learning_rate=inf"], "model.learning_rate: received inf; expected a finite number"),
    (["model=gru_seq2seq", "dataset=synthetic_pairs", "model.units=0"],
     "model.units: received 0; expected >= 1"),
    (["model=gru_seq2seq", "dataset=synthetic_pairs", "model.min_size=-1"],
     "model.min_size: received -1"),  # a model's own check keeps the base's
])
def test_a_models_record_checks_its_keys(compose, overrides, said):
    cfg = compose(*overrides)
    with pytest.raises(errors.UserError) as ex:
        models.of(cfg).check(cfg.model)
    assert str(ex.value).startswith(said)


@pytest.mark.parametrize("overrides, said", [
    (["cluster=slurm", "cluster.peer_start_timeout=0"],
     "cluster.peer_start_timeout: received 0.0; expected seconds > 0 (default 60)"),
    (["cluster=tf_config", "cluster.peer_start_timeout=inf"],
     "cluster.peer_start_timeout: received inf; expected a finite number"),
    (["cluster=tf_config", "cluster.peer_start_timeout=-1"],
     "cluster.peer_start_timeout: received -1.0; expected seconds > 0"),
])
def test_a_cluster_kinds_record_checks_its_keys(compose, overrides, said):
    cfg = compose(*overrides)
    with pytest.raises(errors.UserError) as ex:
        kinds.of(cfg).check(cfg.cluster)
    assert str(ex.value).startswith(said)
