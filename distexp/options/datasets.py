"""Dataset records (`dataset=<name>`): the dataclass of each one's node (`DatasetConfig`, the keys
every dataset has; a dataset's own keys in a subclass), its checks before TensorFlow, its size for
the batch check, whether its labels are random, and what the job process checks is readable (a
sentence-pair file, prepared TFDS data).

Every TensorFlow Datasets option (mnist, cifar10, ... and dataset=tfds itself) is the `tfds`
record: a dataset node with a `tfds_name` is TFDS data. A dataset of one's own outside distexp: a
module that registers a `Dataset` (``register(Dataset(name="toy", implementation=
"my_pkg.toy:load"))``) and ``conf/dataset/<name>.yaml`` naming it (``record: my_pkg.toy_record``;
its node has DatasetConfig's keys); the implementation is called in the training process as
``fn(dataset_cfg, seed)`` and returns distexp.data.loaded.Data.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from omegaconf import MISSING, DictConfig, OmegaConf

from distexp.errors import UserError
from distexp.fields import key
from distexp.options.option import Option, at_least
from distexp.registry import Registry

DIGITS_EXAMPLES = 1797     # scikit-learn's load_digits
PREPROCESSING = ("scale", "standardize", "none")  # dataset.preprocessing of TFDS images
TOKENS = ("word", "char", "auto")  # dataset.source_tokens/target_tokens (distexp.data.text_pairs)
_TASK = "the task this dataset implies (distexp.tasks): classification, seq2seq, ..."


@dataclass
class DatasetConfig:
    name: str = key(MISSING, "the chosen option (dataset=...)")
    task: str = key("classification", _TASK)
    shuffle_buffer: int = key(10000, "tf.data shuffle buffer (examples)")
    prefetch: int = key(-1, "tf.data prefetch (batches); -1 = tf.data.AUTOTUNE")
    threadpool: int = key(0, "tf.data private thread pool for this pipeline (threads); 0 = "
                          "TensorFlow's shared pool")
    on_device: bool = key(False, "keep one batch on the replicas' devices and train on it every "
                          "step (no input cost; loop=custom)")
    record: Optional[str] = key(None, "a dataset of one's own: the module that registers its "
                                "record (distexp.options.datasets); null for the built-ins")


def _test_fraction() -> Any:
    return key(0.2, "fraction held out for evaluation (split fixed by `seed`)")


def _size() -> Any:
    return key(2048, "examples (or pairs) generated for training; eval gets size // 4 (pairs: "
               "train + eval)")


def _num_classes() -> Any:
    return key(10, "number of classes")


@dataclass
class DigitsConfig(DatasetConfig):
    test_fraction: float = _test_fraction()


@dataclass
class SyntheticConfig(DatasetConfig):
    shape: List[int] = key(help="image shape [h, w, c] (or [d])", factory=lambda: [32, 32, 3])
    num_classes: int = _num_classes()
    size: int = _size()


@dataclass
class PairsConfig(DatasetConfig):
    task: str = key("seq2seq", _TASK)
    test_fraction: float = _test_fraction()
    source_tokens: str = key("auto", "how the source side is split into tokens: word, char, or "
                             "auto (char for text without spaces)")
    target_tokens: str = key("auto", "how the target side is split into tokens: word, char, "
                             "auto")
    max_length: Optional[int] = key(None, "drop pairs longer than this many tokens on either "
                                    "side; null = keep all")
    vocab_size: Optional[int] = key(None, "cap each vocabulary (most frequent first; the rest -> "
                                    "<unk>); null = no cap")


@dataclass
class TextPairsConfig(PairsConfig):
    path: Optional[str] = key(None, "the sentence-pair file (source<TAB>target[<TAB>...] per "
                              "line)")


@dataclass
class SyntheticPairsConfig(PairsConfig):
    size: int = _size()


@dataclass
class CustomDatasetConfig(DatasetConfig):
    num_classes: int = _num_classes()
    factory: Optional[str] = key(None, '"package.module:function" called in the trainer as '
                                 "function(seed=..., **dataset.kwargs)")
    kwargs: Dict[str, Any] = key(help="keyword arguments for dataset.factory", factory=dict)
    cache: bool = key(True, "keep the examples of the (train, eval) tf.data.Datasets it returns "
                      "in memory after the first pass")


@dataclass
class TfdsConfig(DatasetConfig):
    tfds_name: Optional[str] = key(None, "the TensorFlow Datasets builder's name")
    train_split: str = key("train", 'training split (TFDS slicing syntax, e.g. "train[:80%]")')
    eval_split: str = key("test", "evaluation split (TFDS slicing syntax)")
    data_dir: Optional[str] = key(None, "where the prepared data lives; null = $TFDS_DATA_DIR or "
                                  "~/tensorflow_datasets")
    download: bool = key(False, "download and prepare the data when it is not prepared")
    image_size: Optional[List[int]] = key(None, "[h, w] to resize images to; required when the "
                                          "images vary in size; null = as stored")
    preprocessing: str = key("scale", "scale (x / 255), standardize (per image), none (as "
                             "stored, float32)")
    cache: bool = key(True, "keep decoded, preprocessed examples in memory after the first pass")


def _fraction(ds) -> None:
    """`dataset.test_fraction` (digits and the sentence pairs)."""
    if not 0 < ds.test_fraction < 1:
        raise UserError(f"dataset.test_fraction: received {ds.test_fraction}; expected 0 < x < 1")


@dataclass(frozen=True)
class Dataset(Option):
    schema: Any = DatasetConfig
    # Labels drawn at random: accuracy is chance level by construction (distexp.figures.meaning).
    random_labels: bool = False
    # The job process's check that the data can be read ("package.module:function" called as
    # fn(dataset_cfg); "" = nothing to check).
    available: str = ""

    def check(self, ds: DictConfig) -> None:
        """This dataset's settings (UserError, one line), before TensorFlow: here the keys every
        dataset has (DatasetConfig's) and those several share where its node has them; a
        dataset's own keys in its subclass, which calls this first (super().check(ds))."""
        at_least("dataset.threadpool", ds.threadpool, 0)
        at_least("dataset.shuffle_buffer", ds.shuffle_buffer, 1)
        at_least("dataset.prefetch", ds.prefetch, -1)
        if "num_classes" in ds:
            at_least("dataset.num_classes", ds.num_classes, 2)
        for split in ("train_split", "eval_split"):
            if split in ds and not str(ds[split]).strip():
                raise UserError(f"dataset.{split}: received {ds[split]!r}; expected a TFDS split, "
                                f"e.g. {'train' if split == 'train_split' else 'test'} or "
                                "train[:80%]")
        where = str(ds.get("data_dir") or "")  # one not there: the data's own line (not prepared)
        if where and os.path.exists(where) and not os.path.isdir(where):
            raise UserError(f"dataset.data_dir: received {where!r}, which is a file; expected the "
                            "directory the prepared data lives in, or null for $TFDS_DATA_DIR or "
                            "~/tensorflow_datasets")

    def train_examples(self, cfg: DictConfig) -> Optional[Tuple[int, str]]:
        """(training examples, the key that sets the batch it is compared with), when known
        before the data is loaded; None otherwise."""
        return None

    def check_available(self, ds: DictConfig) -> None:
        if self.available:
            Option(self.name, self.available).load()(ds)


@dataclass(frozen=True)
class Digits(Dataset):
    def check(self, ds):
        super().check(ds)
        _fraction(ds)

    def train_examples(self, cfg):
        if cfg.steps_per_epoch is not None:
            return None
        n = DIGITS_EXAMPLES - math.ceil(DIGITS_EXAMPLES * cfg.dataset.test_fraction)
        return n, "global_batch_size" if cfg.global_batch_size is not None else \
            "batch_size_per_replica"


@dataclass(frozen=True)
class Synthetic(Dataset):
    def check(self, ds):
        super().check(ds)
        if len(ds.shape) not in (1, 3) or any(d < 1 for d in ds.shape):
            raise UserError(f"dataset.shape: received {list(ds.shape)}; expected [h, w, c] or [d] "
                            "with every size >= 1")
        at_least("dataset.size", ds.size, 1)

    def train_examples(self, cfg):
        return int(cfg.dataset.size), "dataset.size"


@dataclass(frozen=True)
class Pairs(Dataset):
    """Sentence pairs (text_pairs, synthetic_pairs): PairsConfig's keys."""

    def check(self, ds):
        super().check(ds)
        _fraction(ds)
        for side in ("source", "target"):
            if ds[f"{side}_tokens"] not in TOKENS:
                raise UserError(f"dataset.{side}_tokens: received {ds[f'{side}_tokens']!r}; "
                                f"valid: {', '.join(TOKENS)}")
        at_least("dataset.max_length", ds.max_length, 1, allow_none=True)
        at_least("dataset.vocab_size", ds.vocab_size, 5, allow_none=True)


@dataclass(frozen=True)
class TextPairs(Pairs):
    def check(self, ds):
        super().check(ds)
        if not ds.path:
            raise UserError("dataset.path: received null; dataset=text_pairs needs "
                            "dataset.path=<a file of source<TAB>target lines>")


@dataclass(frozen=True)
class Tfds(Dataset):
    def check(self, ds):
        super().check(ds)
        if OmegaConf.is_missing(ds, "tfds_name") or not ds.tfds_name:
            raise UserError("dataset.tfds_name: received nothing; dataset=tfds needs a TFDS builder "
                            "name, e.g. dataset.tfds_name=cifar100")
        if ds.preprocessing not in PREPROCESSING:
            raise UserError(f"dataset.preprocessing: received {ds.preprocessing!r}; valid: "
                            f"{', '.join(PREPROCESSING)}")
        if ds.image_size is not None and (len(ds.image_size) != 2 or min(ds.image_size) < 1):
            raise UserError(f"dataset.image_size: received {list(ds.image_size)}; expected [h, w] "
                            "with sizes >= 1, or null")

    def claims(self, ds) -> bool:
        """dataset=tfds, or any option that names a TFDS builder (mnist, cifar10, ...); `ds`: a
        dataset node or its plain dict."""
        missing = isinstance(ds, DictConfig) and OmegaConf.is_missing(ds, "tfds_name")
        return ds.get("name") == self.name or missing or ds.get("tfds_name") is not None


@dataclass(frozen=True)
class Custom(Dataset):
    def check(self, ds):
        super().check(ds)
        if OmegaConf.is_missing(ds, "factory") or not ds.factory:
            raise UserError("dataset.factory: received null; dataset=custom needs "
                            "dataset.factory=package.module:function")


REGISTRY = Registry("dataset", sort=True, base="Dataset (distexp.options.datasets.register)")
register = REGISTRY.put

_DATA = "distexp.data.loaders"
register(Digits("digits", f"{_DATA}:digits", DigitsConfig))
register(Synthetic("synthetic", f"{_DATA}:synthetic", SyntheticConfig, random_labels=True))
register(TextPairs("text_pairs", f"{_DATA}:text_pairs", TextPairsConfig,
                   available=f"{_DATA}:readable_pairs"))
register(Pairs("synthetic_pairs", f"{_DATA}:synthetic_pairs", SyntheticPairsConfig))
register(Custom("custom", f"{_DATA}:custom", CustomDatasetConfig, factory=True))
TFDS = register(Tfds("tfds", "distexp.data.tfds:tfds_data", TfdsConfig,
                     available=f"{_DATA}:tfds_prepared"))


def of_node(ds: DictConfig) -> Dataset:
    """The record of a dataset node (`dataset.record`, a module path, imported first)."""
    if TFDS.claims(ds):
        return TFDS
    return REGISTRY.load(ds.name, ds.get("record"))


def of(cfg: DictConfig) -> Dataset:
    return of_node(cfg.dataset)


def known(ds):
    """The record of a dataset node or dict whose option is registered here; None otherwise."""
    return TFDS if TFDS.claims(ds) else REGISTRY.get(str(ds.get("name")))


def random_labels(name: str) -> bool:
    """Whether the dataset called `name` (a run's param) draws its labels at random."""
    rec = REGISTRY.get(name)
    return rec is not None and rec.random_labels


def for_task(task: str) -> Tuple[str, ...]:
    """The names of the datasets whose node implies a task (its schema's `task`; seq2seq:
    text_pairs, synthetic_pairs)."""
    return tuple(r.name for r in REGISTRY.values()
                 if {f.name: f.default for f in dataclasses.fields(r.schema)}["task"] == task)
