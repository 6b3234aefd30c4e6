"""Experiment presets, TFDS options, dataset=custom and the Optuna config compose and validate;
TFDS data that is not prepared is one line before TensorFlow; the presets train under TFDS mock
data (the trainer honours DISTEXP_TFDS_MOCK=N: tfds.testing.mock_data(num_examples=N))."""
from __future__ import annotations

import pytest

from distexp import errors
from distexp.config import checks
from helpers import CONF, run_in_process

PRESETS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
def test_the_issue_presets_exist():
    assert set(PRESETS) >= {"keras_mnist", "custom_fashion_mnist", "cassava_resnet50",
                            "cats_vs_dogs_mobilenetv2", "scaling"}


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_composes(compose, preset):
    """The preset's own file lands whole at the top of the config (`# @package _global_`): each
    `override /group: option` picks that option, each value it sets is the composed value; and
    the checks accept the result."""
    from omegaconf import OmegaConf

    own = OmegaConf.load(CONF / "experiment" / f"{preset}.yaml")
    cfg = compose(f"experiment={preset}")
    assert checks.validate(cfg).rec.name == cfg.strategy.name  # accepted: its facts back
    picked = [next(iter(d.items())) for d in own.defaults if not isinstance(d, str)]
    assert picked and {g: cfg[g.split("/")[-1]].name for g, _ in picked} == dict(picked)
    leaves = {k: v for k, v in _leaves(OmegaConf.to_container(own)) if not k.startswith(
        ("defaults", "hydra."))}
    assert leaves and {k: OmegaConf.select(cfg, k) for k in leaves} == leaves


def _leaves(tree, prefix=""):
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def test_presets_say_what_the_tutorials_do(compose):
    k = compose("experiment=keras_mnist")
    assert (k.model.name, k.dataset.name, k.loop.name, k.epochs, k.model.optimizer,
            k.batch_size_per_replica) == ("cnn", "mnist", "fit", 12, "adam", 64)
    f = compose("experiment=custom_fashion_mnist")
    assert (f.dataset.tfds_name, f.loop.name) == ("fashion_mnist", "custom")
    c = compose("experiment=cassava_resnet50")
    assert (c.model.name, c.dataset.tfds_name, c.batch_size_per_replica) == ("resnet50", "cassava", 64)
    m = compose("experiment=cats_vs_dogs_mobilenetv2")
    assert (m.model.name, list(m.dataset.image_size), m.batch_size_per_replica) == \
        ("mobilenet_v2", [224, 224], 64)
    s = compose("experiment=scaling", "hydra.mode=MULTIRUN")
    assert s.dataset.name == "synthetic"


def test_optuna_search_composes(compose):
    cfg = compose("hparams_search=optuna")
    checks.validate(cfg)
    assert cfg.objective == "eval/accuracy"


@pytest.mark.parametrize("overrides,needle", [
    (["dataset=tfds"], "dataset.tfds_name: received nothing; dataset=tfds needs a TFDS builder"),
    (["dataset=mnist", "dataset.preprocessing=bogus"], "dataset.preprocessing: received 'bogus'"),
    (["dataset=mnist", "dataset.image_size=[0,4]"], "dataset.image_size: received [0, 4]"),
    (["dataset=custom"], "dataset.factory: received null; dataset=custom needs"),
    (["objective=eval/acc"], "objective: received 'eval/acc'; valid: eval/accuracy"),
])
def test_validate_rejects(compose, overrides, needle):
    with pytest.raises(errors.UserError) as err:
        checks.validate(compose(*overrides))
    assert needle in str(err.value)


def test_tfds_offline_without_data_is_one_line(tmp_path):
    empty = tmp_path / "no_data"
    r = run_in_process(["dataset=mnist", f"dataset.data_dir={empty}"], tmp_path)
    lines = r.refused()
    assert len(lines) == 1, r
    assert lines[0].startswith(f"distexp: error: dataset: mnist is not prepared in {empty} "
                               f"(looked for {empty}/mnist/"), r
    assert "tfds build mnist --data_dir DIR" in lines[0]
    assert "Traceback" not in r.out
    assert not (tmp_path / "outputs" / "mlflow.db").exists()
