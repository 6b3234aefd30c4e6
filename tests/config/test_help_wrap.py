"""`--help` wraps each key's description to the terminal's width and cuts none (it cut every
description at 100 characters with "...", the README's sweep keys among them)."""
from __future__ import annotations

import pytest

from distexp.config import help as config_help
from distexp.config import schema


@pytest.mark.parametrize("cols", [60, 80, 160])
def test_help_wraps_every_description_to_the_width_and_cuts_none(compose, cols):
    root = compose()
    text = config_help.render(root, schema.Config, cols=cols)
    heads = {f"  {k}={v}" for k, v, _ in config_help.rows(root, schema.Config)}
    lines = [ln for ln in text.split("\n") if ln.rstrip() not in heads]  # a long path: uncut
    assert max(len(ln) for ln in lines) <= cols, [ln for ln in lines if len(ln) > cols]
    flat = " ".join(text.replace("$$", "$").split())
    for key, _, description in config_help.rows(root, schema.Config):
        said = " ".join(description.split())
        assert said in flat, (key, said)  # every word, in order: nothing cut
    long = dict((k, d) for k, _, d in config_help.rows(root, schema.Config))
    assert len(long["progress"]) > 140  # the README's sweep keys, whole
    assert " ".join(long["progress"].split()) in flat

def test_the_width_is_the_terminals(monkeypatch):
    monkeypatch.setenv("COLUMNS", "72")
    assert config_help.columns() == 72
