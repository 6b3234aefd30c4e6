"""Datasets by name -> arrays, and the tf.data pipelines built from them.

Each loader returns host arrays (images float32 in [0, 1] with shape (n, h, w, c) or (n, d),
labels int32). `pipelines` turns them into the training pipeline (shuffle, batch at the *global*
batch size, repeat, prefetch) and the evaluation pipeline (every example once); the loops
distribute them with the strategy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import numpy as np
from omegaconf import DictConfig

from distexp.config import UserError


@dataclass
class Arrays:
    x_train: np.ndarray
    y_train: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray
    num_classes: int
    # Data that is random or already cached: batch once, cache the batches (no per-step work).
    cache_batches: bool = False

    @property
    def input_shape(self) -> Tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


Loader = Callable[[DictConfig, int], Arrays]
REGISTRY: Dict[str, Loader] = {}


def register(name: str):
    def deco(fn: Loader) -> Loader:
        REGISTRY[name] = fn
        return fn
    return deco


def load(cfg: DictConfig) -> Arrays:
    try:
        loader = REGISTRY[cfg.dataset.name]
    except KeyError:
        raise UserError(f"dataset: received {cfg.dataset.name!r}; valid: "
                        f"{', '.join(sorted(REGISTRY))}") from None
    return loader(cfg.dataset, int(cfg.seed))


@register("digits")
def digits(ds: DictConfig, seed: int) -> Arrays:
    """scikit-learn's 1,797 real 8x8 digits (shipped with the package), split by `seed`."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = (bunch.images / 16.0).astype(np.float32)[..., None]  # pixel values are 0..16
    y = bunch.target.astype(np.int32)
    x_tr, x_ev, y_tr, y_ev = train_test_split(x, y, test_size=ds.test_fraction, random_state=seed,
                                              stratify=y)
    return Arrays(x_tr, y_tr, x_ev, y_ev, num_classes=10)


@register("synthetic")
def synthetic(ds: DictConfig, seed: int) -> Arrays:
    """Seeded random images and labels, made once in memory."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in ds.shape)
    n_eval = max(1, int(ds.size) // 4)

    def make(n):
        return (rng.random((n, *shape), dtype=np.float32),
                rng.integers(0, ds.num_classes, size=n, dtype=np.int32))

    x_tr, y_tr = make(int(ds.size))
    x_ev, y_ev = make(n_eval)
    return Arrays(x_tr, y_tr, x_ev, y_ev, num_classes=int(ds.num_classes), cache_batches=True)


def steps_per_epoch(cfg: DictConfig, n_train: int, global_batch: int) -> int:
    if cfg.steps_per_epoch is not None:
        return int(cfg.steps_per_epoch)
    steps = n_train // global_batch
    if steps < 1:
        raise UserError(f"global batch size: {global_batch} is larger than the {n_train} training "
                        f"examples of dataset={cfg.dataset.name}; lower batch_size_per_replica or "
                        "global_batch_size")
    return steps


def pipelines(cfg: DictConfig, arrays: Arrays, global_batch: int, shard_policy=None, shard=None):
    """(train, eval) tf.data pipelines at the global batch size.

    train: shuffled with `seed` (reshuffled each pass), batched with drop_remainder so every step
    has exactly `global_batch` examples, repeated forever (the loop takes steps_per_epoch per
    epoch from one iterator); eval: every example exactly once, last batch partial.
    `shard=(n, i)`: the training pipeline reads only the i-th of n shards of the examples (a ps
    worker's own part).
    """
    import tensorflow as tf

    prefetch = tf.data.AUTOTUNE if cfg.dataset.prefetch < 0 else int(cfg.dataset.prefetch)
    train = tf.data.Dataset.from_tensor_slices((arrays.x_train, arrays.y_train))
    if shard is not None:
        train = train.shard(*shard)
    if arrays.cache_batches:
        train = train.batch(global_batch, drop_remainder=True).cache().repeat()
    else:
        train = (train.shuffle(min(len(arrays.y_train), cfg.dataset.shuffle_buffer), seed=cfg.seed,
                               reshuffle_each_iteration=True)
                 .repeat().batch(global_batch, drop_remainder=True))
    train = train.prefetch(prefetch)
    ev = (tf.data.Dataset.from_tensor_slices((arrays.x_eval, arrays.y_eval))
          .batch(global_batch).cache().prefetch(prefetch))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        shard_policy if shard_policy is not None else tf.data.experimental.AutoShardPolicy.DATA)
    return train.with_options(options), ev.with_options(options)
