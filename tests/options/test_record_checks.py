"""An option's keys are checked by its record (Dataset.check, Model.check, Kind.check: the keys
every option of the group has in the base, a subclass's own after), called with the option's node
alone, before TensorFlow: one line naming the key."""
from __future__ import annotations

import pytest

from distexp import errors
from distexp.cluster import kinds
from distexp.options import datasets, models

RECORD_OF = {"dataset": datasets.of, "model": models.of, "cluster": kinds.of}


@pytest.mark.parametrize("group, overrides, said", [
    ("dataset", ["dataset.shuffle_buffer=0"], "dataset.shuffle_buffer: received 0; expected >= 1"),
    ("dataset", ["dataset.prefetch=-2"], "dataset.prefetch: received -2; expected >= -1"),
    ("dataset", ["dataset.threadpool=-1"], "dataset.threadpool: received -1; expected >= 0"),
    ("dataset", ["dataset=synthetic", "dataset.num_classes=1"],
     "dataset.num_classes: received 1; expected >= 2"),
    ("dataset", ["dataset=mnist", "dataset.train_split=' '"],
     "dataset.train_split: received ' '; expected a TFDS split"),
    ("dataset", ["dataset=digits", "dataset.test_fraction=1.5"],
     "dataset.test_fraction: received 1.5"),
    ("model", ["model.min_size=-1"], "model.min_size: received -1; expected >= 0"),
    ("model", ["model.learning_rate=0"], "model.learning_rate: received 0.0; expected > 0"),
    ("model", ["model.learning_rate=inf"],
     "model.learning_rate: received inf; expected a finite number"),
    ("model", ["model=gru_seq2seq", "dataset=synthetic_pairs", "model.units=0"],
     "model.units: received 0; expected >= 1"),
    ("model", ["model=gru_seq2seq", "dataset=synthetic_pairs", "model.min_size=-1"],
     "model.min_size: received -1"),  # a model's own check keeps the base's
    ("cluster", ["cluster=slurm", "cluster.peer_start_timeout=0"],
     "cluster.peer_start_timeout: received 0.0; expected seconds > 0 (default 60)"),
    ("cluster", ["cluster=tf_config", "cluster.peer_start_timeout=inf"],
     "cluster.peer_start_timeout: received inf; expected a finite number"),
    ("cluster", ["cluster=tf_config", "cluster.peer_start_timeout=-1"],
     "cluster.peer_start_timeout: received -1.0; expected seconds > 0"),
])
def test_an_options_record_checks_its_keys(compose, group, overrides, said):
    cfg = compose(*overrides)
    with pytest.raises(errors.UserError) as ex:
        RECORD_OF[group](cfg).check(cfg[group])
    assert str(ex.value).startswith(said)
