"""TensorFlow Datasets: supervised (image, label) splits of any builder, and the one line when the
data is not prepared (nothing downloads unless dataset.download=true)."""
from __future__ import annotations

import contextlib
import logging
import os

from omegaconf import DictConfig

from distexp import env
from distexp.data.loaded import Data
from distexp.errors import UserError, first_line


def _quiet_absl() -> None:
    logging.getLogger("absl").setLevel(logging.ERROR)

def open_builder(ds: DictConfig):
    import tensorflow_datasets as tfds

    _quiet_absl()
    try:
        return tfds.builder(ds.tfds_name, data_dir=ds.data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        raise UserError(f"dataset.tfds_name: received {ds.tfds_name!r}; not a TensorFlow Datasets "
                        "builder (see `tfds.list_builders()`)") from None

def not_prepared(ds: DictConfig, builder) -> UserError:
    root = os.path.dirname(os.path.dirname(builder.data_dir.rstrip("/")))
    if "/" in ds.tfds_name.split(":")[0]:  # name/config: one more level
        root = os.path.dirname(root)
    return UserError(
        f"dataset: {ds.tfds_name} is not prepared in {root} (looked for {builder.data_dir}) and "
        f"dataset.download=false; prepare it on a machine that reaches the data's host with "
        f"`tfds build {ds.tfds_name} --data_dir DIR`, copy DIR here and pass dataset.data_dir=DIR "
        "(or set dataset.download=true where the host is reachable)")

def _load(ds: DictConfig, seed: int):
    """(train, eval, info) of the builder's splits (mock data under DISTEXP_TFDS_MOCK), or the
    one line saying why not."""
    import tensorflow_datasets as tfds

    _quiet_absl()
    mock = os.environ.get(env.TFDS_MOCK)
    scope = tfds.testing.mock_data(num_examples=int(mock)) if mock else contextlib.nullcontext()
    with scope:
        builder = open_builder(ds)
        if not mock and not ds.download and not builder.is_prepared():
            raise not_prepared(ds, builder)
        try:
            (train, ev), info = tfds.load(
                ds.tfds_name, split=[ds.train_split, ds.eval_split], data_dir=ds.data_dir,
                download=bool(ds.download), as_supervised=True, with_info=True,
                shuffle_files=False, read_config=tfds.ReadConfig(shuffle_seed=seed))
        except AssertionError:  # "could not find data in <dir>"
            raise not_prepared(ds, builder) from None
        except (ValueError, KeyError) as ex:
            raise UserError(f"dataset.train_split/eval_split: received {ds.train_split!r}, "
                            f"{ds.eval_split!r}; {first_line(ex)}") from None
        except Exception as ex:  # a download that failed
            if not ds.download:
                raise
            raise UserError(f"dataset: downloading {ds.tfds_name} failed ({type(ex).__name__}: "
                            f"{first_line(ex, 200)}); prepare it elsewhere with `tfds "
                            f"build {ds.tfds_name} --data_dir DIR` and pass dataset.data_dir=DIR") from None
    return train, ev, info


def _image_shape(ds: DictConfig, stored: tuple) -> tuple:
    """The images' shape after preprocessing: dataset.image_size, else as stored (fixed size)."""
    if ds.image_size is not None:
        return (int(ds.image_size[0]), int(ds.image_size[1]), stored[-1])
    if None in stored:
        raise UserError(f"dataset.image_size: received null, but {ds.tfds_name} images vary in size "
                        f"{list(stored)}; set dataset.image_size=[224,224]")
    return stored


def _prep_fn(ds: DictConfig, shape: tuple):
    """The per-example map: float32 image, resized and scaled/standardized as configured; int32 label."""
    import tensorflow as tf

    size = list(shape[:2]) if ds.image_size is not None else None
    how = ds.preprocessing

    def prep(x, y):
        x = tf.cast(x, tf.float32)
        if size is not None:
            x = tf.image.resize(x, size)
        if how == "scale":
            x = x / 255.0
        elif how == "standardize":
            x = tf.image.per_image_standardization(x)
        return tf.ensure_shape(x, shape), tf.cast(y, tf.int32)

    return prep


def _count(info, split: str, d):
    """A split's number of examples: the builder's metadata, else the dataset's cardinality."""
    try:
        return int(info.splits[split].num_examples)
    except (KeyError, ValueError):  # mock data: no split metadata
        n = int(d.cardinality())
        return n if n >= 0 else None


def tfds_data(ds: DictConfig, seed: int) -> Data:
    """Supervised (image, label) splits of a TFDS builder, preprocessed, unbatched."""
    import tensorflow as tf

    train, ev, info = _load(ds, seed)
    image_key, label_key = info.supervised_keys
    shape = _image_shape(ds, tuple(info.features[image_key].shape))
    prep = _prep_fn(ds, shape)
    sizes = (_count(info, ds.train_split, train), _count(info, ds.eval_split, ev))
    auto = tf.data.AUTOTUNE
    return Data(None, None, None, None, num_classes=int(info.features[label_key].num_classes),
                  train=train.map(prep, num_parallel_calls=auto),
                  eval=ev.map(prep, num_parallel_calls=auto), shape=shape, sizes=sizes,
                  cache=bool(ds.cache))
