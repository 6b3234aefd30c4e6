"""distexp.data.text_pairs: pair files, tokens, vocabularies, teacher-forcing arrays, the synthetic task.
No TensorFlow: these run in well under a second."""
from __future__ import annotations

import numpy as np
import pytest

from distexp.data.text_pairs import (
    PairData,
    Vocab,
    build_pairs,
    load_text_pairs,
    number_words,
    read_pairs,
    resolve_mode,
    synthetic_pairs,
    tokenize,
)
from distexp.errors import UserError

# Tatoeba/ManyThings format: English<TAB>Chinese<TAB>attribution (extra columns ignored).
CORPUS = (
    "Hi.\t嗨。\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #891077 (Martha)\n"
    "Run!\t跑！\tCC-BY 2.0\n"
    "\n"
    "I won!\t我赢了！\tCC-BY 2.0\n"
    "I am Tom.\t我是汤姆。\tCC-BY 2.0\n"
    "Tom won?\t汤姆赢了？\n"
)


@pytest.fixture
def corpus(tmp_path):
    p = tmp_path / "cmn.txt"
    p.write_text(CORPUS, encoding="utf-8")
    return p


def test_tokenize_english_words_and_chinese_chars():
    assert tokenize("Hi.", "word") == ["hi", "."]
    assert tokenize("I won!", "word") == ["i", "won", "!"]
    assert tokenize("Don't stop, Tom's x-ray?", "word") == ["don't", "stop", ",", "tom's", "x-ray", "?"]
    assert tokenize("ÉCOLE  Ａｂｃ", "word") == ["école", "abc"]  # Unicode lower-case, NFKC
    assert tokenize("我赢了！", "char") == ["我", "赢", "了", "!"]  # NFKC: full-width ！ -> !
    assert tokenize("嗨。", "char") == ["嗨", "。"]  # the ideographic full stop stays a token
    assert tokenize("a b", "char") == ["a", "b"]


def test_auto_resolves_per_side(corpus):
    pairs = read_pairs(corpus)
    assert resolve_mode([s for s, _ in pairs], "auto") == "word"
    assert resolve_mode([t for _, t in pairs], "auto") == "char"
    # one-word English lines abstain; a digit-only side (no space anywhere) is split into chars
    assert resolve_mode(["Hi.", "Run!", "Go.", "I am here."], "auto") == "word"
    assert resolve_mode(["42", "7"], "auto") == "char"
    assert resolve_mode(["a b"], "char") == "char"
    with pytest.raises(UserError, match=r"^dataset.target_tokens: received 'chars'; valid: word, char, auto$"):
        resolve_mode(["x"], "chars", "dataset.target_tokens")


def test_read_pairs_ignores_extra_columns_and_blank_lines(corpus):
    assert read_pairs(corpus) == [("Hi.", "嗨。"), ("Run!", "跑！"), ("I won!", "我赢了！"),
                                  ("I am Tom.", "我是汤姆。"), ("Tom won?", "汤姆赢了？")]


def test_exact_vocab_and_arrays(corpus):
    d = load_text_pairs(corpus, test_fraction=0.0)
    assert isinstance(d, PairData) and (d.source_mode, d.target_mode) == ("word", "char")
    assert d.n_train == 5 and d.n_eval == 0
    # source counts: "!" 2, "." 2, "i" 2, "tom" 2, "won" 2, then 1 each; ties alphabetical
    assert d.src_vocab.tokens == ["<pad>", "<unk>", "<start>", "<end>",
                                  "!", ".", "i", "tom", "won", "?", "am", "hi", "run"]
    # target: 了 2, 汤 2, 姆 2, 我 2, 赢 2, ! 2, 。2, then 1 each (code-point order)
    assert d.tgt_vocab.tokens[4:] == sorted(["了", "汤", "姆", "我", "赢", "!", "。"]) + sorted(["?", "嗨", "是", "跑"])
    assert (d.max_src_len, d.max_tgt_len) == (4, 6)  # "i am tom ." ; "汤姆赢了?" + a marker
    assert d.src_train.dtype == np.int32 and d.src_train.shape == (5, 4)
    assert d.tgt_in_train.shape == d.tgt_out_train.shape == (5, 6)
    assert d.tgt_in_train.dtype == d.tgt_out_train.dtype == np.int32
    for src, tin, tout in zip(d.src_train, d.tgt_in_train, d.tgt_out_train):
        n = int((tout != 0).sum())
        assert tin[0] == Vocab.START and tout[n - 1] == Vocab.END
        np.testing.assert_array_equal(tin[1:n], tout[:n - 1])  # shifted by one: teacher forcing
        assert (tin[n:] == 0).all() and (tout[n:] == 0).all()
    rows = {" ".join(d.src_vocab.decode(s)): "".join(d.tgt_vocab.decode(t)) for s, t in
            zip(d.src_train, d.tgt_out_train)}
    assert rows == {"hi .": "嗨。", "run !": "跑!", "i won !": "我赢了!", "i am tom .": "我是汤姆。",
                    "tom won ?": "汤姆赢了?"}


def test_vocab_encode_decode():
    v = Vocab(["<pad>", "<unk>", "<start>", "<end>", "a", "b"])
    assert (Vocab.PAD, Vocab.UNK, Vocab.START, Vocab.END, len(v)) == (0, 1, 2, 3, 6)
    assert v.encode(["a", "b", "zzz"]) == [4, 5, 1]
    assert v.decode(v.encode(["b", "a", "b"])) == ["b", "a", "b"]
    assert v.decode([2, 4, 0, 5, 3, 4, 4]) == ["a", "b"]  # <start>, <pad> skipped; stops at <end>
    with pytest.raises(ValueError):
        Vocab(["a", "<unk>", "<start>", "<end>"])


def test_max_length_drops_and_counts(corpus):
    d = load_text_pairs(corpus, max_length=3, test_fraction=0.0)
    # source tokens: hi . (2), run ! (2), i won ! (3), i am tom . (4), tom won ? (3)
    # target chars:  2, 2, 4, 5, 5  -> kept only where both <= 3
    assert d.dropped_too_long == 3 and d.n_train == 2
    assert (d.max_src_len, d.max_tgt_len) == (2, 3)
    with pytest.raises(UserError, match=r"^dataset.max_length: received 1; it drops all 5 pairs"):
        load_text_pairs(corpus, max_length=1)


def test_vocab_size_caps_with_unk(corpus):
    d = load_text_pairs(corpus, vocab_size=6, test_fraction=0.0)
    assert d.src_vocab.tokens == ["<pad>", "<unk>", "<start>", "<end>", "!", "."]
    assert len(d.tgt_vocab) == 6
    assert (d.src_train == Vocab.UNK).sum() == 10  # 14 source tokens, 4 of them "!" or "."
    assert d.src_vocab.decode(d.src_vocab.encode(["i", "won", "!"])) == ["<unk>", "<unk>", "!"]
    with pytest.raises(UserError, match=r"^dataset.vocab_size: received 4; valid: null or an integer >= 5"):
        load_text_pairs(corpus, vocab_size=4)


def test_split_reproducible_by_seed():
    pairs = synthetic_pairs(200, seed=3)
    a, b = build_pairs(pairs, seed=1), build_pairs(pairs, seed=1)
    c = build_pairs(pairs, seed=2)
    assert (a.n_train, a.n_eval) == (160, 40)
    np.testing.assert_array_equal(a.src_eval, b.src_eval)
    np.testing.assert_array_equal(a.tgt_out_train, b.tgt_out_train)
    assert a.src_vocab.tokens == b.src_vocab.tokens
    assert a.src_eval.shape == c.src_eval.shape and not np.array_equal(a.src_eval, c.src_eval)
    def key(d, s, t):
        return {(tuple(d.src_vocab.decode(x)), tuple(d.tgt_vocab.decode(y))) for x, y in zip(s, t)}

    # the eval pairs are exactly the pairs missing from train
    assert len(key(a, a.src_train, a.tgt_out_train) | key(a, a.src_eval, a.tgt_out_eval)) == 200


@pytest.mark.parametrize("content, expected", [
    ("Hi.\t嗨。\nRun!\t跑！\nWait!\t等等！\nGo.\t走。\nHello\t你好\nOops.\t哎呀。\nbad line\nOk.\t好。\n",
     r"^dataset.path: received '.*p.txt'; line 7 has 1 tab-separated column\(s\); expected "
     r"'source<TAB>target\[<TAB>...\]' on every line$"),
    ("Hi.\t嗨。\n\t跑！\n", r"^dataset.path: received '.*'; line 2 has an empty source \(column 1\); expected"),
    ("Hi.\t嗨。\nRun!\t \tCC\n", r"^dataset.path: received '.*'; line 2 has an empty target \(column 2\); expected"),
    ("\n\n   \n", r"^dataset.path: received '.*'; the file has no pairs; expected 'source<TAB>target"),
    ("", r"^dataset.path: received '.*'; the file has no pairs"),
])
def test_malformed_file_is_one_line_naming_the_line(tmp_path, content, expected):
    p = tmp_path / "p.txt"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=expected) as info:
        read_pairs(p)
    assert "\n" not in str(info.value)


def test_undecodable_missing_and_directory(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes("Hi.\t嗨。\n".encode() + "Caf\xe9.\tx\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"^dataset.path: received '.*latin1.txt'; line 2 is not valid "
                                        r"UTF-8 \(byte 4\); expected a UTF-8 text file$"):
        read_pairs(p)
    with pytest.raises(UserError, match=r"^dataset.path: received '.*nope.txt'; no such file; expected"):
        read_pairs(tmp_path / "nope.txt")
    with pytest.raises(UserError, match=r"^dataset.path: received '.*'; it is a directory; expected"):
        read_pairs(tmp_path)


_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven "
                                      "twelve thirteen fourteen fifteen sixteen seventeen eighteen "
                                      "nineteen".split())}
_WORDS.update({w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty "
                                                "ninety".split()) if i >= 2})


def _parse(words: str) -> int:
    """English number words -> int, written independently of distexp.data.text_pairs."""
    total = current = 0
    for w in words.split():
        if w == "hundred":
            current *= 100
        elif w == "thousand":
            total, current = total + current * 1000, 0
        else:
            current += _WORDS[w]
    return total + current


def test_synthetic_pairs_deterministic_distinct_and_correct():
    a = synthetic_pairs(3000, seed=0)
    assert a == synthetic_pairs(3000, seed=0) and a != synthetic_pairs(3000, seed=1)
    assert len(set(a)) == 3000
    assert all(_parse(w) == int(d) and str(int(d)) == d for w, d in a)
    assert number_words(42701) == "forty two thousand seven hundred one"
    assert number_words(0) == "zero" and number_words(90010) == "ninety thousand ten"
    d = build_pairs(a)
    assert (d.source_mode, d.target_mode) == ("word", "char")
    assert len(d.tgt_vocab) == 14 and (d.max_src_len, d.max_tgt_len) == (7, 6)
    with pytest.raises(UserError, match=r"^dataset.size: received 200; valid: 1 to 100"):
        synthetic_pairs(200, max_digits=2)
