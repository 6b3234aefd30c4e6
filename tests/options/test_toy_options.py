"""A model and a dataset of one's own, from a record and a yaml alone.

The test writes a module that registers a `Model` record (distexp.options.models) and a `Dataset`
record (distexp.options.datasets) and `conf/model/tiny.yaml` / `conf/dataset/blobs.yaml` naming
it (`record:`) into a temporary directory, adds that conf dir to Hydra's search path, and checks
that the generic code composes, checks (the dataset's size for the batch check included), logs the
keys that apply, describes it in --help and loads its data (test_toy_options_slow.py trains
with them). Nothing outside the temporary directory is edited. No TensorFlow.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

from distexp import errors
from distexp.config import checks, schema
from distexp.config import help as config_help
from distexp.data import loaders
from distexp.options import datasets, models
from helpers import TOY_OPTIONS as RECORD
from helpers import plug_in


@pytest.fixture
def toy(tmp_path, monkeypatch, compose):
    plug_in(tmp_path, monkeypatch, "model", "tiny", "toy_options", RECORD)
    search = plug_in(tmp_path, monkeypatch, "dataset", "blobs", "toy_options", RECORD)
    yield lambda *o: compose(search, "model=tiny", "dataset=blobs", "gpus=0", *o)
    models.REGISTRY.pop("tiny", None)
    datasets.REGISTRY.pop("blobs", None)
    sys.modules.pop("toy_options", None)


def test_a_toy_model_and_dataset_compose_check_and_load(toy):
    cfg = toy("strategy=one_device")
    assert "tiny" not in models.REGISTRY  # nothing registered it yet: the yaml's record does
    checks.validate(cfg)
    assert models.of(cfg).name == "tiny" and datasets.of(cfg).name == "blobs"
    params = schema.flatten(cfg)
    assert params["model.record"] == params["dataset.record"] == "toy_options"
    # the keys a built-in option claims do not apply to the toys
    assert not {"model.factory", "model.units", "dataset.shape", "dataset.test_fraction",
                "dataset.tfds_name"} & set(params)
    assert "dataset.shuffle_buffer" in params and "model.optimizer" in params
    data = loaders.load(cfg)
    assert (data.x_train.shape, data.num_classes) == ((96, 4), 3)
    assert np.array_equal(data.y_eval, loaders.load(cfg).y_eval)  # seeded


def test_a_toy_dataset_answers_the_batch_check(toy):
    with pytest.raises(errors.UserError, match=r"batch_size_per_replica: received 128; dataset="
                                               r"blobs has 96 training examples, fewer than one "
                                               r"global batch \(128\)"):
        checks.validate(toy("strategy=one_device", "batch_size_per_replica=128"))


def test_help_lists_a_toy_options_keys(toy):
    listed = {k: d for k, _, d in config_help.rows(toy("strategy=one_device"), schema.Config)}
    assert {"model.name", "model.record", "dataset.name", "dataset.record"} <= set(listed)
    assert not {"model.units", "model.factory", "dataset.shape", "dataset.tfds_name"} & set(listed)
    assert "registers its record" in listed["model.record"]


def test_a_toy_option_has_its_groups_keys_only(toy):
    """A yaml with no schema of its own composes onto the group's (DatasetConfig, ModelConfig):
    a built-in option's key is refused at composition, in one line naming the toy's keys."""
    from omegaconf import OmegaConf

    from distexp.options.datasets import DatasetConfig
    from distexp.options.models import ModelConfig

    cfg = toy("strategy=one_device")
    assert (OmegaConf.get_type(cfg.model), OmegaConf.get_type(cfg.dataset)) == (ModelConfig,
                                                                                DatasetConfig)
    with pytest.raises(Exception) as ex:
        toy("strategy=one_device", "dataset.shape=[4]")
    assert errors.one_line(ex.value) == (
        "dataset.shape: unknown key for dataset=blobs (received [4]); valid: name, task, "
        "shuffle_buffer, prefetch, threadpool, on_device, record")
