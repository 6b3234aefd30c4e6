"""Each vocabulary has one home, and no module spells its words elsewhere: metric names
(distexp/figures/perf_keys.py), tag names (distexp/tracking/tags.py), the process-plumbing
environment names (distexp/env.py), exit codes (distexp/errors.py) and the console's line kinds
(`distexp: error: `, `warning`, `detail`: distexp/console_lines.py). Read from the source, so a
new literal fails here rather than as a typo'd MLflow key. Tier: unit."""
from __future__ import annotations

import ast
import re

import pytest

from helpers import ROOT

pytestmark = pytest.mark.unit

PKG = ROOT / "distexp"


def _sources():
    for path in sorted(PKG.rglob("*.py")):
        yield path.relative_to(PKG).as_posix(), path.read_text()


def _strings(text: str):
    """Every string constant of a module (f-strings' literal parts included)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_perf_metric_names_only_in_their_home():
    found = [f"{rel}:{n}: {s!r}" for rel, text in _sources()
             if rel != "figures/perf_keys.py"
             for n, s in _strings(text) if s.startswith("perf/")]
    assert not found, found


def test_tag_names_only_in_their_home():
    modules = {"distexp." + p.relative_to(PKG).with_suffix("").as_posix().replace("/", ".")
               for p in PKG.rglob("*.py")}
    modules |= {m.rsplit(".", 1)[0] for m in modules}
    resolvers = {"distexp.cwd", "distexp.checkpoint_dir", "distexp.help", "distexp.groups",
                 "distexp.workload"}
    found = [f"{rel}:{n}: {s!r}" for rel, text in _sources() if rel != "tracking/tags.py"
             for n, s in _strings(text)
             if re.fullmatch(r"distexp\.[a-z_]+", s) and s not in modules | resolvers
             and s != "distexp.log"]
    assert not found, found


def environment_names_elsewhere(sources) -> list:
    """The `DISTEXP_*` names spelt outside env.py (a docstring that mentions one is prose)."""
    return [f"{rel}:{n}: {s!r}" for rel, text in sources if rel != "env.py"
            for n, s in _strings(text) if re.fullmatch(r"DISTEXP_[A-Z0-9_]*", s)]


def test_plumbing_environment_names_only_in_their_home():
    """No `DISTEXP_*` literal outside distexp/env.py, whether env.py names it yet or not."""
    assert environment_names_elsewhere(_sources()) == []


def test_an_environment_name_elsewhere_is_found():
    assert environment_names_elsewhere([("x.py", 'A = "DISTEXP_NEW"\n"""DISTEXP_NEW: prose"""')]) \
        == ["x.py:1: 'DISTEXP_NEW'"]
    assert environment_names_elsewhere([("env.py", 'A = "DISTEXP_NEW"')]) == []


def test_exit_codes_are_named():
    """No sys.exit / SystemExit / os._exit with a number other than 0 outside distexp/errors.py."""
    found = []
    for rel, text in _sources():
        if rel == "errors.py":
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, int) and node.args[0].value != 0 \
                    and ast.unparse(node.func) in ("sys.exit", "SystemExit", "os._exit", "exit"):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found


# The console's line kinds are spelt in distexp/console_lines.py only (its ERROR, WARNING, DETAIL,
# `error(text)`, `kind_of(line)`); a module that prints or parses one uses it.
KINDS = ("distexp: error:", "distexp: warning:", "distexp: detail:")


def line_kinds_elsewhere(sources) -> list:
    """String or bytes literals starting with a line kind's prefix outside console_lines.py (a
    docstring that mentions one is prose: it does not start with it)."""
    found = [(rel, node.lineno, node.value) for rel, text in sources
             if rel != "console_lines.py"
             for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Constant)
             and isinstance(node.value, (str, bytes))
             and (node.value if isinstance(node.value, str) else node.value.decode("utf-8", "replace"))
             .startswith(KINDS)]
    return [f"{rel}:{n}: {v!r}" for rel, n, v in sorted(found, key=lambda f: f[:2])]


def test_the_consoles_line_kinds_only_in_their_home():
    assert line_kinds_elsewhere(_sources()) == []


def test_a_line_kind_elsewhere_is_found():
    found = line_kinds_elsewhere([
        ("x.py", 'print(f"distexp: warning: {x}")\nA = b"distexp: detail: T"\n"""Without "distexp: error: "."""\n'
                 'ok = line.startswith("distexp: error:")\n'),
        ("console_lines.py", 'ERROR = "distexp: error: "\n'),
    ])
    assert found == ["x.py:1: 'distexp: warning: '", "x.py:2: b'distexp: detail: T'",
                     "x.py:4: 'distexp: error:'"]
