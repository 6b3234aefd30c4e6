"""The sweep's state is handed, not kept in modules; the Hydra plugin is Hydra's glue.

1. No module-level mutable state in `STATELESS` (distexp/sweeps/ and distexp/__main__.py): no
   `global` statement (a module name re-bound at run time, as `_RAN = Ran(...)` in `cli()` was),
   and no module-level name bound to an object made by a call (`SWEEPS = Sweeps()` was), a
   comprehension, or a list, dict or set display that the module itself changes later (an
   `append`, `update`, `[k] = ...`, ... on that name). Constant tables, tuples, literals and type
   aliases are fine. The one exception: a `contextvars.ContextVar` (its value is the running
   command's, set and reset by the command: distexp.sweeps.ending.command), and
   `logging.getLogger`. A command's sweeps and jobs are handed down from `cli()`; the round loop
   is handed its open sweep (distexp.sweeps.sweep.Sweep.run).
2. The plugin (`PLUGIN`) holds no round logic: no `while` loop, nothing from the modules of the
   rounds (distexp.sweeps.auto, records, setups), under `PLUGIN_LINES` lines.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import List

from helpers import ROOT

STATELESS = ("distexp/sweeps", "distexp/__main__.py")
ALLOWED_CALLS = ("contextvars.ContextVar", "logging.getLogger")
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear",
            "add", "discard", "remove"}
PLUGIN = "hydra_plugins/distexp_sweeper/distexp_sweeper.py"
PLUGIN_LINES = 150
ROUND_MODULES = ("distexp.sweeps.auto", "distexp.sweeps.records", "distexp.sweeps.setups")


def _files(root: Path) -> List[Path]:
    out = []
    for where in STATELESS:
        path = root / where
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def _module_level(tree: ast.Module):
    """Statements run at import: the module's body, into `if`/`try` blocks (not functions)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                     *(s for h in getattr(node, "handlers", []) for s in h.body)]


def _mutated(tree: ast.Module) -> set:
    """Names changed in place anywhere in the module: `name.append(...)`, `name[k] = ...`."""
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in MUTATORS and isinstance(n.func.value, ast.Name):
            found.add(n.func.value.id)
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
            found |= {t.value.id for t in targets
                      if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}
    return found


def state_offenders(root: Path = ROOT) -> List[str]:
    """`path:line: name` of each module-level mutable state and `global` statement (module
    docstring, 1)."""
    found = []
    for path in _files(root):
        tree = ast.parse(path.read_text())
        where = path.relative_to(root).as_posix()
        found += [f"{where}:{n.lineno}: global {', '.join(n.names)}" for n in ast.walk(tree)
                  if isinstance(n, ast.Global)]
        changed = _mutated(tree)
        for node in _module_level(tree):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = node.value
            made = isinstance(value, (ast.Call, ast.ListComp, ast.DictComp, ast.SetComp)) and not (
                isinstance(value, ast.Call) and ast.unparse(value.func) in ALLOWED_CALLS)
            display = isinstance(value, (ast.List, ast.Dict, ast.Set))
            found += [f"{where}:{node.lineno}: {n}" for n in names
                      if made or (display and n in changed)]
    return found


def test_no_module_level_state_in_the_sweep_and_the_cli():
    assert state_offenders() == []


def test_module_level_state_is_found(tmp_path):
    (tmp_path / "distexp/sweeps").mkdir(parents=True)
    (tmp_path / "distexp/sweeps/x.py").write_text(
        "import contextvars\nimport logging\n\n\nclass Sweeps:\n    pass\n\n\n"
        "SWEEPS = Sweeps()\nKINDS = ('a', 'b')\nTABLE = {'a': 1}\nSEEN = []\n"
        "CURRENT = contextvars.ContextVar('c', default=None)\nlog = logging.getLogger(__name__)\n"
        "if True:\n    CACHE: dict = dict()\n\n\ndef f():\n    SEEN.append(1)\n")
    (tmp_path / "distexp/__main__.py").write_text(
        "RAN = None\n\n\ndef cli():\n    global RAN\n    RAN = object()\n")
    assert state_offenders(tmp_path) == [
        "distexp/sweeps/x.py:9: SWEEPS", "distexp/sweeps/x.py:12: SEEN",
        "distexp/sweeps/x.py:16: CACHE", "distexp/__main__.py:5: global RAN"]


def plugin_offenders(root: Path = ROOT) -> List[str]:
    """What in the plugin is round logic (module docstring, 2)."""
    path = root / PLUGIN
    text = path.read_text()
    tree = ast.parse(text)
    found = [f"{PLUGIN}:{n.lineno}: while" for n in ast.walk(tree) if isinstance(n, ast.While)]
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            names = [f"{n.module}.{a.name}" for a in n.names]
            found += [f"{PLUGIN}:{n.lineno}: {m}" for m in names
                      if m.startswith(ROUND_MODULES) or n.module in ROUND_MODULES]
    lines = len(text.splitlines())
    if lines > PLUGIN_LINES:
        found.append(f"{PLUGIN}: {lines} lines (at most {PLUGIN_LINES})")
    return found


def test_the_plugin_is_hydras_glue_only():
    assert plugin_offenders() == []


def test_round_logic_in_the_plugin_is_found(tmp_path):
    path = tmp_path / PLUGIN
    path.parent.mkdir(parents=True)
    path.write_text("from distexp.sweeps import auto, planning\n\n\ndef f(rounds):\n"
                    "    while not rounds.finished():\n        pass\n" + "#\n" * PLUGIN_LINES)
    assert plugin_offenders(tmp_path) == [
        f"{PLUGIN}:5: while", f"{PLUGIN}:1: distexp.sweeps.auto",
        f"{PLUGIN}: {PLUGIN_LINES + 6} lines (at most {PLUGIN_LINES})"]
