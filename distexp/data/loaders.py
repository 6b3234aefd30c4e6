"""The built-in datasets' loaders -> arrays (or unbatched tf.data), and the tf.data pipelines built from them.

Each loader returns host arrays (images float32 in [0, 1] with shape (n, h, w, c) or (n, d),
labels int32; for sentence pairs x is a (source, target_in) pair of int32 token arrays and y the
target_out tokens; a user's regression keeps float labels), or, for data that does not fit in
memory as arrays (TensorFlow Datasets, a user's tf.data), unbatched preprocessed
tf.data.Datasets of (x, y). `pipelines` turns either into the
training pipeline (shuffle, batch at the *global* batch size, repeat, prefetch) and the evaluation
pipeline (every example once); the loops distribute them with the strategy.

TensorFlow Datasets: `check_available` runs in the job process (tensorflow_datasets imports
without TensorFlow) so that data that is not prepared is one line before any training process
starts. Test aid: with DISTEXP_TFDS_MOCK=N in the environment, TFDS loading runs under
`tfds.testing.mock_data(num_examples=N)` (random examples with the real features, no files).
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
from omegaconf import DictConfig, OmegaConf

from distexp import env
from distexp.data import validate
from distexp.data.loaded import Data
from distexp.data.tfds import not_prepared, open_builder
from distexp.errors import UserError
from distexp.options import datasets as records


def load(cfg: DictConfig) -> Data:
    """The data of `cfg.dataset`'s record (distexp.options.datasets), loaded by its implementation."""
    return records.of(cfg).load()(cfg.dataset, int(cfg.seed))


def digits(ds: DictConfig, seed: int) -> Data:
    """scikit-learn's 1,797 real 8x8 digits (shipped with the package), split by `seed`."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = (bunch.images / 16.0).astype(np.float32)[..., None]  # pixel values are 0..16
    y = bunch.target.astype(np.int32)
    x_tr, x_ev, y_tr, y_ev = train_test_split(x, y, test_size=ds.test_fraction, random_state=seed,
                                              stratify=y)
    return Data(x_tr, y_tr, x_ev, y_ev, num_classes=10)


def synthetic(ds: DictConfig, seed: int) -> Data:
    """Seeded random images and labels, made once in memory."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in ds.shape)
    n_eval = max(1, int(ds.size) // 4)

    def make(n):
        return (rng.random((n, *shape), dtype=np.float32),
                rng.integers(0, ds.num_classes, size=n, dtype=np.int32))

    x_tr, y_tr = make(int(ds.size))
    x_ev, y_ev = make(n_eval)
    return Data(x_tr, y_tr, x_ev, y_ev, num_classes=int(ds.num_classes), cache_batches=True)


def _pairs(ds: DictConfig, seed: int, pairs=None) -> Data:
    """Sentence pairs -> ((source, target_in), target_out) token arrays (distexp.data.text_pairs)."""
    from distexp.data import text_pairs

    kw = dict(source_tokens=ds.source_tokens, target_tokens=ds.target_tokens,
              max_length=ds.max_length, vocab_size=ds.vocab_size,
              test_fraction=ds.test_fraction, seed=seed)
    p = text_pairs.load_text_pairs(ds.path, **kw) if pairs is None else text_pairs.build_pairs(pairs, **kw)
    info = {"src_vocab_size": len(p.src_vocab), "tgt_vocab_size": len(p.tgt_vocab),
            "max_src_len": p.max_src_len, "max_tgt_len": p.max_tgt_len,
            "source_tokens": p.source_mode, "target_tokens": p.target_mode}
    return Data((p.src_train, p.tgt_in_train), p.tgt_out_train,
                  (p.src_eval, p.tgt_in_eval), p.tgt_out_eval,
                  num_classes=len(p.tgt_vocab), info=info)


def text_pairs(ds: DictConfig, seed: int) -> Data:
    """A tab-separated sentence-pair file (Tatoeba/ManyThings: source<TAB>target[<TAB>...])."""
    return _pairs(ds, seed)


def synthetic_pairs(ds: DictConfig, seed: int) -> Data:
    """Sentence pairs generated in code (numbers written in words -> digits): seq2seq on a fresh
    machine with no file."""
    from distexp.data import text_pairs

    return _pairs(ds, seed, text_pairs.synthetic_pairs(n=int(ds.size), seed=seed))


def steps_per_epoch(cfg: DictConfig, n_train: Optional[int], global_batch: int) -> int:
    if cfg.steps_per_epoch is not None:
        return int(cfg.steps_per_epoch)
    if n_train is None:
        raise UserError(f"steps_per_epoch: received null, but the size of dataset="
                        f"{cfg.dataset.name} is unknown; set steps_per_epoch=N")
    steps = n_train // global_batch
    if steps < 1:
        raise UserError(f"global batch size: {global_batch} is larger than the {n_train} training "
                        f"examples of dataset={cfg.dataset.name}; lower batch_size_per_replica or "
                        "global_batch_size")
    return steps


def pipelines(cfg: DictConfig, data: Data, global_batch: int, shard=None):
    """(train, eval) tf.data pipelines at the global batch size.

    train: shuffled with `seed` (reshuffled each pass), batched with drop_remainder so every step
    has exactly `global_batch` examples, repeated forever (the loop takes steps_per_epoch per
    epoch from one iterator); eval: every example exactly once, last batch partial.
    `shard=(n, i)`: the training pipeline reads only the i-th of n shards of the examples (a ps
    worker's own part).
    """
    import tensorflow as tf

    prefetch = tf.data.AUTOTUNE if cfg.dataset.prefetch < 0 else int(cfg.dataset.prefetch)
    if data.train is not None:
        train, ev = data.train, data.eval
        if shard is not None:
            train = train.shard(*shard)
        if data.cache:
            train, ev = train.cache(), ev.cache()
        train = (train.shuffle(cfg.dataset.shuffle_buffer, seed=cfg.seed,
                               reshuffle_each_iteration=True)
                 .repeat().batch(global_batch, drop_remainder=True))
        ev = ev.batch(global_batch)
        for fn in data.per_batch:
            train, ev = train.map(fn), ev.map(fn)
        train, ev = train.prefetch(prefetch), ev.prefetch(prefetch)
        return _with_options(tf, train, ev, int(cfg.dataset.threadpool))
    train = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
    if shard is not None:
        train = train.shard(*shard)
    if data.cache_batches:
        train = train.batch(global_batch, drop_remainder=True).cache().repeat()
    else:
        train = (train.shuffle(min(len(data.y_train), cfg.dataset.shuffle_buffer), seed=cfg.seed,
                               reshuffle_each_iteration=True)
                 .repeat().batch(global_batch, drop_remainder=True))
    train = train.prefetch(prefetch)
    ev = (tf.data.Dataset.from_tensor_slices((data.x_eval, data.y_eval))
          .batch(global_batch).cache().prefetch(prefetch))
    return _with_options(tf, train, ev, int(cfg.dataset.threadpool))


def _with_options(tf, train, ev, threadpool: int = 0):
    """Both pipelines auto-sharded by DATA across workers (each keeps its share of the elements), with
    `dataset.threadpool`'s private pool when set."""
    options = tf.data.Options()
    if threadpool > 0:  # dataset.threadpool: a private pool for this pipeline
        options.threading.private_threadpool_size = threadpool
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return train.with_options(options), ev.with_options(options)


# --- dataset=custom: a user's function ---------------------------------------------------------

def custom(ds: DictConfig, seed: int) -> Data:
    """dataset.factory=package.module:function, called as function(seed=seed, **dataset.kwargs)."""
    from distexp.user_code import load_factory

    fn = load_factory("dataset.factory", ds.factory)
    kwargs = OmegaConf.to_container(ds.kwargs, resolve=True) if ds.kwargs else {}
    try:
        out = fn(seed=seed, **kwargs)
    except UserError:
        raise
    except Exception as ex:  # noqa: BLE001
        raise UserError(f"dataset.factory: {ds.factory} raised {type(ex).__name__}: {ex}") from None
    return from_user(out, ds)


def from_user(out, ds: DictConfig) -> Data:
    """A factory's return value -> Data: 4 arrays, 2 tf.data.Datasets, or a dict of either."""
    where = f"dataset.factory: {ds.factory} returned"
    num_classes = None
    if isinstance(out, dict):
        num_classes = out.get("num_classes")
        if "x_train" in out:
            out = (out["x_train"], out["y_train"], out["x_eval"], out["y_eval"])
        elif "train" in out:
            out = (out["train"], out["eval"])
        else:
            raise UserError(f"{where} a dict with keys {sorted(out)}; expected x_train, y_train, "
                            "x_eval, y_eval (arrays) or train, eval (tf.data), plus num_classes")
    if isinstance(out, (tuple, list)) and len(out) == 4:
        return _from_arrays(where, [np.asarray(a) for a in out], num_classes)
    if isinstance(out, (tuple, list)) and len(out) == 2:
        import tensorflow as tf

        train, ev = out
        if not isinstance(train, tf.data.Dataset) or not isinstance(ev, tf.data.Dataset):
            raise UserError(f"{where} a pair of {type(train).__name__}, {type(ev).__name__}; "
                            "expected two unbatched tf.data.Datasets of (x, y)")
        validate.check_tfdata(where, train, ev)
        shape = train.element_spec[0].shape
        if not shape.is_fully_defined():
            raise UserError(f"{where} examples of shape {shape}; every x must have a fixed shape "
                            "(resize in the factory), and the datasets must be unbatched")

        def size(d):
            n = int(d.cardinality())
            return n if n >= 0 else None

        label = tf.int32 if train.element_spec[1].dtype.is_integer else tf.float32

        def cast(x, y):  # on each batch (Data.per_batch), not on each example
            return tf.cast(x, tf.float32), tf.cast(y, label)
        return Data(None, None, None, None, num_classes=int(num_classes or ds.num_classes),
                      train=train, eval=ev, shape=tuple(shape), sizes=(size(train), size(ev)),
                      cache=bool(ds.cache), per_batch=(cast,))
    raise UserError(f"{where} {type(out).__name__}; expected (x_train, y_train, x_eval, y_eval) "
                    "arrays or (train, eval) tf.data.Datasets")


def _from_arrays(where: str, arrays, num_classes) -> Data:
    x_tr, y_tr, x_ev, y_ev = arrays
    if len(x_tr) != len(y_tr) or len(x_ev) != len(y_ev) or x_tr.shape[1:] != x_ev.shape[1:]:
        raise UserError(f"{where} arrays that do not match: x_train {x_tr.shape}, y_train "
                        f"{y_tr.shape}, x_eval {x_ev.shape}, y_eval {y_ev.shape}")
    validate.check_arrays(where, x_tr, y_tr, x_ev, y_ev)
    if np.issubdtype(y_tr.dtype, np.integer):  # class labels; (n, 1) taken as (n,)
        y_tr, y_ev = (y.astype(np.int32).reshape(-1) if y.shape[1:] == (1,)
                      else y.astype(np.int32) for y in (y_tr, y_ev))
        k = int(num_classes or max(y_tr.max(), y_ev.max()) + 1)
    else:  # real-valued targets (a user's regression task): kept as float32
        y_tr, y_ev = y_tr.astype(np.float32), y_ev.astype(np.float32)
        k = int(num_classes or (y_tr.shape[1] if y_tr.ndim > 1 else 1))
    return Data(x_tr.astype(np.float32), y_tr, x_ev.astype(np.float32), y_ev, num_classes=k)


# --- TensorFlow Datasets -----------------------------------------------------------------------


def check_available(cfg: DictConfig) -> None:
    """In the job process, before any training process: TFDS data that is not prepared (and will
    not be downloaded), or a sentence-pair file that cannot be read, is a one-line user error (the
    dataset's record names its check). No TensorFlow is imported."""
    records.of(cfg).check_available(cfg.dataset)


def readable_pairs(ds: DictConfig) -> None:
    """A missing, empty or malformed sentence-pair file: one line naming the line."""
    from distexp.data import text_pairs

    text_pairs.read_pairs(ds.path)


def tfds_prepared(ds: DictConfig) -> None:
    if ds.download or os.environ.get(env.TFDS_MOCK):
        return
    builder = open_builder(ds)
    if not builder.is_prepared():
        raise not_prepared(ds, builder)
