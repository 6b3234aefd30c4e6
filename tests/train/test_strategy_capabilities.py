"""The trainer asks a strategy's record what it can do, never the TensorFlow strategy's class:
`distributed_input_only` (a TPU's replicas take a distributed dataset, even one replica:
distexp.train.loops.evaluate) and the dispatcher's `local_replicas` (ps schedules steps onto
remote workers: distexp.train.step). Read from the source and the records; no TensorFlow."""
from __future__ import annotations

import ast
from pathlib import Path

from distexp import strategies
from helpers import ROOT

TRAIN = ROOT / "distexp" / "train"


def strategy_class_tests(root: Path) -> list:
    """`isinstance(x, tf.distribute...)` calls under `root`, as "<file>:<line>"."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance" \
                    and len(node.args) == 2 and "distribute" in ast.unparse(node.args[1]):
                out.append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def test_the_train_side_tells_strategies_apart_by_their_records():
    assert strategy_class_tests(TRAIN) == []


def test_a_strategy_class_test_is_found(tmp_path):
    (tmp_path / "x.py").write_text("import tensorflow as tf\n\n"
                                   "ok = isinstance(s, int)\n"
                                   "bad = isinstance(s, tf.distribute.TPUStrategy)\n")
    assert strategy_class_tests(tmp_path) == ["x.py:4"]


def test_only_a_tpu_takes_distributed_input_only():
    assert [r.name for r in strategies.REGISTRY.values() if r.distributed_input_only] == ["tpu"]
    assert [r.name for r in strategies.REGISTRY.values() if r.coordinated] == ["ps"]
