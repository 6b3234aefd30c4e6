"""Sentence-pair corpora for a GRU encoder-decoder: reading, tokenizing, vocabularies, arrays.

Pure Python and NumPy (no TensorFlow), so the job process can check a file before training starts.

- A *pair file* is UTF-8 text, one pair per line: ``source<TAB>target[<TAB>anything...]`` (the
  Tatoeba/ManyThings format ``English<TAB>Chinese<TAB>attribution``); extra columns are ignored,
  blank lines skipped. ``read_pairs`` reads it; every problem is one ``UserError`` line naming
  ``dataset.path`` and, for a bad line, its 1-based line number.
- A *token mode* says how one side is split: ``word`` (whitespace, punctuation split off) or
  ``char`` (one token per non-space character); ``auto`` is resolved per side over its whole
  corpus by ``resolve_mode``.
- A ``Vocab`` maps tokens to ids; ids 0-3 are reserved: ``<pad>``, ``<unk>``, ``<start>``, ``<end>``.
- ``build_pairs`` turns pairs into ``PairData``: padded int32 arrays for teacher forcing
  (``tgt_in`` = ``<start>`` + target, ``tgt_out`` = target + ``<end>``), vocabularies built from
  the train split only, a split reproducible by ``seed``.
- ``synthetic_pairs`` generates a learnable task in code (numbers in English words -> digits).
"""
from __future__ import annotations

import os
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from distexp.errors import UserError
from distexp.options.datasets import TOKENS as MODES  # the keys' values, one home

# Scripts written without spaces between words: a line in them with no whitespace votes "char".
_NO_SPACE_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")
_KEEP_INSIDE_WORD = "'-"  # an apostrophe or hyphen between letters stays in the word: don't, x-ray


@dataclass
class Vocab:
    """Tokens by id. ``tokens[:4]`` must be the reserved ``<pad>``, ``<unk>``, ``<start>``, ``<end>``."""
    tokens: List[str]
    _index: Dict[str, int] = field(init=False, repr=False, compare=False)

    PAD, UNK, START, END = 0, 1, 2, 3
    RESERVED = ("<pad>", "<unk>", "<start>", "<end>")

    def __post_init__(self):
        if tuple(self.tokens[:4]) != self.RESERVED:
            raise ValueError(f"Vocab: received tokens starting {self.tokens[:4]!r}; "
                             f"expected {list(self.RESERVED)!r} first")
        self._index = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def from_counts(cls, counts: Counter, size: Optional[int] = None) -> "Vocab":
        """Most frequent first, ties alphabetical; ``size`` caps the total including the 4 reserved."""
        ranked = sorted((t for t in counts if t not in cls.RESERVED), key=lambda t: (-counts[t], t))
        if size is not None:
            ranked = ranked[:max(0, size - len(cls.RESERVED))]
        return cls(list(cls.RESERVED) + ranked)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Sequence[str]) -> List[int]:
        """Ids of ``tokens`` (no markers added); unknown tokens -> ``UNK``."""
        return [self._index.get(t, self.UNK) for t in tokens]

    def decode(self, ids: Iterable[int]) -> List[str]:
        """Tokens of ``ids`` up to (not including) the first ``<end>``; ``<pad>`` and ``<start>`` skipped."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.END:
                break
            if i in (self.PAD, self.START):
                continue
            out.append(self.tokens[i] if 0 <= i < len(self.tokens) else self.RESERVED[self.UNK])
        return out


def normalize(text: str) -> str:
    """NFKC (full-width forms become ASCII, e.g. ``？`` -> ``?``; ``。`` stays), then lower-case."""
    return unicodedata.normalize("NFKC", text).lower().strip()


def _is_punct(text: str, i: int) -> bool:
    ch = text[i]
    if unicodedata.category(ch)[0] not in "PS":
        return False
    if ch in _KEEP_INSIDE_WORD and 0 < i < len(text) - 1:
        return not (text[i - 1].isalnum() and text[i + 1].isalnum())
    return True


def tokenize(text: str, mode: str) -> List[str]:
    """Tokens of one sentence. ``text`` is normalized (``normalize``) and punctuation and symbols
    become tokens of their own ("hi." -> ["hi", "."]); ``word`` then splits on whitespace, ``char``
    gives one token per non-space character. ``auto`` decides for this one text (use
    ``resolve_mode`` to decide once for a whole corpus)."""
    if mode == "auto":
        mode = resolve_mode([text], "auto")
    text = normalize(text)
    if mode == "char":
        return [c for c in text if not c.isspace()]
    if mode != "word":
        raise ValueError(f"tokenize: received mode={mode!r}; valid: {', '.join(MODES)}")
    spaced = "".join(f" {c} " if _is_punct(text, i) else c for i, c in enumerate(text))
    return spaced.split()


def _no_space_script(line: str) -> bool:
    return any(unicodedata.name(c, "").startswith(_NO_SPACE_SCRIPTS) for c in line)


def resolve_mode(lines: Iterable[str], mode: str, key: str = "dataset.source_tokens") -> str:
    """``word`` or ``char`` for one side of a corpus. ``auto`` -> ``char`` when more lines vote for
    it than for ``word``, or when no line has whitespace at all (e.g. digits). A line with
    whitespace votes ``word``; a line without votes ``char`` if it holds a letter of a script
    written without spaces (Chinese, Japanese, Thai, ...), otherwise it abstains (a one-word
    English line such as "Hi." says nothing in a corpus of sentences)."""
    if mode not in MODES:
        raise UserError(f"{key}: received {mode!r}; valid: {', '.join(MODES)}")
    if mode != "auto":
        return mode
    words = chars = 0
    for line in lines:
        line = normalize(line)
        if any(c.isspace() for c in line):
            words += 1
        elif _no_space_script(line):
            chars += 1
    return "char" if chars > words or words == 0 else "word"


def read_pairs(path: str) -> List[Tuple[str, str]]:
    """(source, target) of every non-blank line of a tab-separated UTF-8 file (columns 0 and 1)."""
    p = str(path)
    head = f"dataset.path: received {p!r}; "
    fmt = "expected 'source<TAB>target[<TAB>...]' on every line"
    if not os.path.exists(p):
        raise UserError(head + "no such file; expected a UTF-8 text file of 'source<TAB>target' lines")
    if os.path.isdir(p):
        raise UserError(head + "it is a directory; expected a UTF-8 text file of 'source<TAB>target' lines")
    with open(p, "rb") as f:
        raw = f.read()
    pairs: List[Tuple[str, str]] = []
    for n, bline in enumerate(raw.splitlines(), start=1):
        try:
            line = bline.decode("utf-8")
        except UnicodeDecodeError as ex:
            raise UserError(head + f"line {n} is not valid UTF-8 (byte {ex.start + 1}); "
                                   "expected a UTF-8 text file") from None
        if n == 1:
            line = line.lstrip("\ufeff")  # a byte-order mark
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            raise UserError(head + f"line {n} has {len(cols)} tab-separated column(s); {fmt}")
        src, tgt = cols[0].strip(), cols[1].strip()
        if not src or not tgt:
            side = "source (column 1)" if not src else "target (column 2)"
            raise UserError(head + f"line {n} has an empty {side}; {fmt}")
        pairs.append((src, tgt))
    if not pairs:
        raise UserError(head + f"the file has no pairs; {fmt}")
    return pairs


@dataclass
class PairData:
    """Padded int32 arrays for teacher forcing, and what made them.

    ``src_*``: [N, max_src_len] source ids, 0-padded, no markers. ``tgt_in_*``: [N, max_tgt_len]
    ``<start>`` + target ids; ``tgt_out_*``: target ids + ``<end>`` (``tgt_in`` shifted left by
    one), both 0-padded. ``max_tgt_len`` = longest target + 1 (room for a marker), so greedy
    decoding for ``max_tgt_len`` steps can reach ``<end>``. ``dropped_too_long``: pairs with more
    than ``max_length`` tokens on either side; ``dropped_empty``: pairs with no token on a side.
    """
    src_train: np.ndarray
    tgt_in_train: np.ndarray
    tgt_out_train: np.ndarray
    src_eval: np.ndarray
    tgt_in_eval: np.ndarray
    tgt_out_eval: np.ndarray
    src_vocab: Vocab
    tgt_vocab: Vocab
    max_src_len: int
    max_tgt_len: int
    source_mode: str
    target_mode: str
    dropped_too_long: int = 0
    dropped_empty: int = 0

    @property
    def n_train(self) -> int:
        return len(self.src_train)

    @property
    def n_eval(self) -> int:
        return len(self.src_eval)


def _pad(rows: List[List[int]], width: int) -> np.ndarray:
    out = np.zeros((len(rows), width), dtype=np.int32)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def build_pairs(pairs: Sequence[Tuple[str, str]], *, source_tokens: str = "auto",
                target_tokens: str = "auto", max_length: Optional[int] = None,
                vocab_size: Optional[int] = None, test_fraction: float = 0.2,
                seed: int = 0) -> PairData:
    """Tokenize, drop pairs longer than ``max_length`` tokens on either side (markers not counted),
    split reproducibly (``np.random.default_rng(seed).permutation``; ``test_fraction`` to eval, at
    least one pair each side when there are two or more), build each side's vocabulary from the
    train split, encode (unknown -> ``<unk>``) and pad."""
    if max_length is not None and max_length < 1:
        raise UserError(f"dataset.max_length: received {max_length!r}; valid: null or an integer >= 1")
    if vocab_size is not None and vocab_size < len(Vocab.RESERVED) + 1:
        raise UserError(f"dataset.vocab_size: received {vocab_size!r}; valid: null or an integer >= 5 "
                        "(4 ids are reserved: <pad>, <unk>, <start>, <end>)")
    if not 0.0 <= test_fraction < 1.0:
        raise UserError(f"dataset.test_fraction: received {test_fraction!r}; valid: 0 <= x < 1")
    smode = resolve_mode((s for s, _ in pairs), source_tokens, "dataset.source_tokens")
    tmode = resolve_mode((t for _, t in pairs), target_tokens, "dataset.target_tokens")
    kept, too_long, empty = [], 0, 0
    for s, t in pairs:
        st, tt = tokenize(s, smode), tokenize(t, tmode)
        if not st or not tt:
            empty += 1
        elif max_length is not None and max(len(st), len(tt)) > max_length:
            too_long += 1
        else:
            kept.append((st, tt))
    if not kept:
        raise UserError(f"dataset.max_length: received {max_length!r}; it drops all {len(pairs)} pairs "
                        f"({too_long} too long, {empty} empty); valid: null or a larger integer")
    n = len(kept)
    n_eval = int(round(n * test_fraction))
    if test_fraction > 0 and n >= 2:
        n_eval = min(max(n_eval, 1), n - 1)
    order = np.random.default_rng(seed).permutation(n)
    train = [kept[i] for i in order[n_eval:]]
    evals = [kept[i] for i in order[:n_eval]]
    sv = Vocab.from_counts(Counter(t for s, _ in train for t in s), vocab_size)
    tv = Vocab.from_counts(Counter(t for _, g in train for t in g), vocab_size)
    s_len = max(len(s) for s, _ in kept)
    t_len = max(len(t) for _, t in kept) + 1

    def arrays(part):
        src = _pad([sv.encode(s) for s, _ in part], s_len)
        ids = [tv.encode(t) for _, t in part]
        return (src, _pad([[Vocab.START] + i for i in ids], t_len),
                _pad([i + [Vocab.END] for i in ids], t_len))

    return PairData(*arrays(train), *arrays(evals), src_vocab=sv, tgt_vocab=tv,
                    max_src_len=s_len, max_tgt_len=t_len, source_mode=smode, target_mode=tmode,
                    dropped_too_long=too_long, dropped_empty=empty)


def load_text_pairs(path: str, **kw) -> PairData:
    """``build_pairs(read_pairs(path), **kw)``."""
    return build_pairs(read_pairs(path), **kw)


_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """``n`` (0 <= n < 10**6) in English words, no "and": 42701 -> "forty two thousand seven hundred one"."""
    if not 0 <= n < 10**6:
        raise ValueError(f"number_words: received {n}; valid: 0 <= n < 1000000")
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        return _ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + number_words(n % 100))
    return number_words(n // 1000) + " thousand" + ("" if n % 1000 == 0 else " " + number_words(n % 1000))


def synthetic_pairs(n: int = 10000, *, seed: int = 0, max_digits: int = 5) -> List[Tuple[str, str]]:
    """``n`` distinct pairs (number in English words, its digits), numbers drawn uniformly without
    replacement from [0, 10**max_digits) by ``np.random.default_rng(seed)``. Source: words;
    target: one character per digit. Words and digits do not align one-to-one ("forty two
    thousand seven hundred one" -> "42701": "hundred" and "thousand" carry place value, a zero
    digit has no word), so each digit depends on finding the right words; attention learns it
    faster (measured, GRU 128: eval token accuracy 0.999 after 4 epochs of 8,000 pairs, 0.88
    with the attention context zeroed)."""
    if not 1 <= max_digits <= 6:
        raise UserError(f"dataset.max_digits: received {max_digits!r}; valid: 1 to 6")
    if not 1 <= n <= 10**max_digits:
        raise UserError(f"dataset.size: received {n!r}; valid: 1 to {10**max_digits} "
                        f"(distinct numbers below 10**{max_digits})")
    numbers = np.random.default_rng(seed).choice(10**max_digits, size=n, replace=False)
    return [(number_words(int(k)), str(int(k))) for k in numbers]
