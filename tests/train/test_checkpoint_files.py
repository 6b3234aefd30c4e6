"""Checkpoints on disk read back before they are trusted, and what a checkpoint holds (TensorFlow
in this process, nothing trained: integration)."""
from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A model with Dropout, saved twice by tf.train.CheckpointManager (ckpt-5, ckpt-10)."""
    import keras
    import tensorflow as tf

    from distexp.train.checkpoints import seed_states

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dropout(0.5),
                              keras.layers.Dense(3)])
    d = tmp_path_factory.mktemp("ck")
    ckpt = tf.train.Checkpoint(model=model, seeds=seed_states(model))
    manager = tf.train.CheckpointManager(ckpt, str(d), max_to_keep=3)
    for n in (5, 10):
        manager.save(checkpoint_number=n)
    return model, d


def test_the_dropout_layers_generator_is_in_the_checkpoint(saved):
    """The checkpoint of a model alone does not hold the SeedGenerator's state; seed_states adds
    it (without it a resumed job draws the first steps' masks again)."""
    import tensorflow as tf

    model, d = saved
    names = [n for n, _ in tf.train.list_variables(str(d / "ckpt-10"))]
    assert any(n.startswith("seeds/") for n in names), names
    dropout = model.layers[1]
    assert [v.path for v in model.non_trainable_variables] == [dropout.seed_generator.state.path]


def _copy(d, to):
    import shutil

    shutil.copytree(d, to)
    return to


@pytest.mark.parametrize("damage,at_fault,why", [
    ("truncate data", "ckpt-10.data-00000-of-00001", "IndexError: Read less bytes than requested"),
    ("empty index", "ckpt-10.index", "sstable"),
    ("flip a data byte", "ckpt-10.data-00000-of-00001", "Checksum does not match"),
    ("delete data", "ckpt-10.data-00000-of-00001", "No such file or directory"),
])
def test_a_damaged_checkpoint_is_named_by_its_file(saved, tmp_path, damage, at_fault, why):
    from distexp.train import checkpoint_files as files

    d = _copy(saved[1], tmp_path / "ck")
    data, index = d / "ckpt-10.data-00000-of-00001", d / "ckpt-10.index"
    if damage == "truncate data":
        os.truncate(data, data.stat().st_size // 2)
    elif damage == "empty index":
        os.truncate(index, 0)
    elif damage == "flip a data byte":
        b = bytearray(data.read_bytes())
        b[len(b) // 2] ^= 0xFF
        data.write_bytes(bytes(b))
    else:
        data.unlink()
    assert files.unreadable(str(d / "ckpt-5")) is None
    problem = files.unreadable(str(d / "ckpt-10"))
    assert problem is not None and problem[0] == str(d / at_fault) and why in problem[1], problem
    assert files.candidates(d) == [str(d / "ckpt-10"), str(d / "ckpt-5")]


def test_checkpoints_are_found_when_the_state_file_does_not_parse(saved, tmp_path):
    from distexp.train import checkpoint_files as files

    d = _copy(saved[1], tmp_path / "ck")
    (d / "checkpoint").write_text("model_checkpoint_path: \x00garbage {")
    assert files.candidates(d) == [str(d / "ckpt-10"), str(d / "ckpt-5")]
