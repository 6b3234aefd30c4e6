"""Fakes for unit tests: a clock moved by hand, the real sweeper on a composed config with a
launcher that records the jobs instead of starting them, and an option of one's own (a record's
module and its yaml) in a temporary directory."""
from __future__ import annotations

from pathlib import Path

from helpers.cli import CONF


class Clock:
    """A fake clock: `t` is what time.perf_counter returns (tests move it by hand)."""

    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class RecordingLauncher:
    def __init__(self):
        self.launched = []

    def launch(self, job_overrides, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus

        out = []
        for i, overrides in enumerate(job_overrides):
            self.launched.append((initial_job_idx + i, list(overrides)))
            ret = JobReturn(overrides=list(overrides), _return_value=0.5)
            ret.status = JobStatus.COMPLETED
            out.append(ret)
        return out


def sweeper(tmp_path, *overrides):
    """The real DistexpSweeper on the composed config, its launcher recording the jobs."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import HydraContext

    from distexp.config import schema

    schema.register()
    from hydra_plugins.distexp_sweeper.distexp_sweeper import DistexpSweeper

    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="config", overrides=[*overrides, f"hydra.sweep.dir={tmp_path}"],
                      return_hydra_config=True)
        params = cfg.hydra.sweeper.params
        sweeper = DistexpSweeper(max_batch_size=None, params=dict(params) if params else None)
        sweeper.config = cfg
        sweeper.hydra_context = HydraContext(
            config_loader=GlobalHydra.instance().config_loader(), callbacks=None)
        sweeper.launcher = RecordingLauncher()
    return sweeper


def launched(tmp_path, *args, preset=()):
    """The override lists of the jobs the real sweeper launches for `args` (after `preset`, e.g.
    an experiment), recorded instead of started."""
    from hydra.core.global_hydra import GlobalHydra

    try:
        recorder = sweeper(tmp_path, *preset)
        recorder.sweep(list(args))
        return [ovr for _, ovr in recorder.launcher.launched]
    finally:
        GlobalHydra.instance().clear()


def plug_in(tmp_path: Path, monkeypatch, group: str, option: str, module: str,
            source: str) -> str:
    """Write `source` as the importable module `module` and `conf/<group>/<option>.yaml` naming it
    (`record: module`), both under `tmp_path`; returns the override that adds that conf dir to
    Hydra's search path. The caller unregisters the record and drops the module afterwards."""
    import textwrap

    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / f"{module}.py").write_text(textwrap.dedent(source))
    conf = tmp_path / "conf" / group
    conf.mkdir(parents=True, exist_ok=True)
    (conf / f"{option}.yaml").write_text(f"name: {option}\nrecord: {module}\n")
    monkeypatch.syspath_prepend(str(pkg))
    return f"hydra.searchpath=[file://{tmp_path / 'conf'}]"


# A model and a dataset of one's own (plug_in's module `toy_options`): a one-layer model and three
# well-separated Gaussian blobs in 4-d (96 training, 32 evaluation examples, seeded).
TOY_OPTIONS = '''
import numpy as np

from distexp.data.loaded import Data
from distexp.options import datasets, models


class Blobs(datasets.Dataset):
    def train_examples(self, cfg):
        return 96, "batch_size_per_replica"


models.register(models.Model("tiny", "toy_options:tiny"))
datasets.register(Blobs("blobs", "toy_options:blobs"))


def tiny(m, shape, classes):
    import keras

    return keras.Sequential([keras.Input(shape=shape), keras.layers.Dense(classes)], name="tiny")


def blobs(ds, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=128).astype(np.int32)
    x = (rng.normal(scale=0.5, size=(128, 4)) + 4 * np.eye(4)[y]).astype(np.float32)
    return Data(x[:96], y[:96], x[96:], y[96:], num_classes=3)
'''
