"""Tasks before TensorFlow: refusals of what a task cannot take, the task implied by the dataset,
a pair file's errors in one line. Training: tests/tasks/test_tasks.py. Tier: unit."""
from __future__ import annotations

import pytest

from helpers import run_in_process

# the probe phase (perf/step_*_ms, tests/train/test_breakdown.py) traces seq2seq for several s: off here
SEQ = ["model=gru_seq2seq", "dataset=synthetic_pairs", "measure_step_split=false"]


@pytest.mark.parametrize("overrides,needle", [
    (["strategy=ps", "jit_compile=true"], "jit_compile: received true with strategy=ps"),
    (["strategy=ps", "dataset.on_device=true"], "dataset.on_device: received true with strategy=ps"),
    (["strategy=ps", "strategy.cross_device_ops=hierarchical_copy"],
     "strategy.cross_device_ops: received 'hierarchical_copy' with strategy=ps"),
    ([*SEQ, "loop=fit"], "loop: received 'fit' with the seq2seq task; Keras 3 loss objects"),
    (["model=gru_seq2seq"], "dataset: received 'digits' with model=gru_seq2seq"),
    (["dataset=synthetic_pairs"], "model: received 'cnn' with a seq2seq task"),
    (["model=gru_seq2seq", "dataset=text_pairs"], "dataset.path: received null"),
    ([*SEQ, "objective=eval/accuracy"], "objective: received 'eval/accuracy'; valid: "
     "eval/token_accuracy, eval/sequence_accuracy, eval/loss"),
    ([*SEQ, "dataset.source_tokens=bpe"], "dataset.source_tokens: received 'bpe'; valid: word"),
    # the records' own range checks (distexp.options: Dataset.check, Model.check)
    ([*SEQ, "dataset.target_tokens=bpe"], "dataset.target_tokens: received 'bpe'; valid: word, "
     "char, auto"),
    ([*SEQ, "dataset.max_length=0"], "dataset.max_length: received 0; expected >= 1"),
    ([*SEQ, "dataset.vocab_size=4"], "dataset.vocab_size: received 4; expected >= 5"),
    ([*SEQ, "dataset.test_fraction=1.0"], "dataset.test_fraction: received 1.0; expected 0 < x < 1"),
    (["dataset.test_fraction=0"], "dataset.test_fraction: received 0.0; expected 0 < x < 1"),
    ([*SEQ, "model.units=0"], "model.units: received 0; expected >= 1"),
    ([*SEQ, "model.embedding_dim=-1"], "model.embedding_dim: received -1; expected >= 1"),
    (["task.name=custom"], "task.factory: received null"),
    (["task.name=ranking"], "task.name: received 'ranking'; valid: classification, seq2seq"),
    (["task.factory=factories:mse_task", "loop=fit"], "loop: received 'fit' with the custom task"),
])
def test_refused_before_tensorflow(compose, overrides, needle):
    from distexp import errors
    from distexp.config import checks

    with pytest.raises(errors.UserError) as err:
        checks.validate(compose(*overrides))
    assert str(err.value).startswith(needle), err.value


def test_task_is_implied_by_the_dataset(compose):
    from distexp import tasks
    from distexp.config import resolved

    assert tasks.name_of(compose()) == "classification"
    seq = compose(*SEQ)
    assert tasks.name_of(seq) == "seq2seq" and resolved.objective_name(seq) == "eval/token_accuracy"
    assert resolved.objective_name(compose()) == "eval/accuracy"
    assert tasks.name_of(compose("task.factory=factories:mse_task")) == "custom"


def test_built_in_tasks_come_from_the_registry_a_fresh_one_per_job(compose):
    """The trainer's way to a task (tasks.get): the registry's class, instantiated per job (a task
    keeps state, e.g. from_logits); an unknown name is the registry's one line, custom listed."""
    from distexp import errors, tasks

    seq = compose(*SEQ)
    assert type(tasks.get(seq)) is tasks.Seq2Seq and tasks.get(seq) is not tasks.get(seq)
    assert tasks.NAMES == ("classification", "seq2seq", "custom")
    with pytest.raises(errors.UserError) as err:
        tasks.get(compose("task.name=ranking"))
    assert str(err.value) == "task.name: received 'ranking'; valid: classification, seq2seq, custom"


def test_pair_file_errors_are_one_line_before_tensorflow(tmp_path):
    bad = tmp_path / "pairs.txt"
    bad.write_text("Hi.\t嗨。\tCC-BY\nno tab on this line\n", encoding="utf-8")
    r = run_in_process([*SEQ[:1], "dataset=text_pairs", f"dataset.path={bad}"], tmp_path)
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("distexp: error: dataset.path: received "), r
    assert "line 2" in lines[0] and "Strategy:" not in r.stdout, r


# Every candidate figure with its own value: a consumer that reads the wrong name reads a wrong value.
FINAL = {"eval/accuracy": 0.91, "eval/loss": 0.72, "eval/token_accuracy": 0.53, "eval/mae": 0.34}
USER_TASK = "task.factory=factories:mse_task"  # its objective, eval/mae, is known in the trainer


@pytest.mark.parametrize("overrides,expected", [
    ([], "eval/accuracy"),
    (["objective=eval/loss"], "eval/loss"),
    (SEQ, "eval/token_accuracy"),
    ([USER_TASK], "eval/mae"),
    ([USER_TASK, "objective=eval/loss"], "eval/loss"),
])
def test_trainer_job_and_resumed_sweep_read_one_objective(compose, overrides, expected):
    """The job's facts name the objective (a user's task's: completed by the trainer); the
    trainer's param, the job's exit value and a resumed sweep's value all read that name."""
    from factories import mse_task

    from distexp import tasks
    from distexp.config import resolved
    from distexp.job import lifecycle
    from distexp.sweeps import planning
    from distexp.train import trainer

    cfg = compose(*overrides)
    facts = resolved.facts_of(resolved.attach(cfg, resolved.resolve(cfg, gpus=0)))
    task = tasks.builtin(cfg) or mse_task()
    assert resolved.complete_objective(facts, task) == facts.objective == expected
    params = trainer.task_params(facts, task)  # what the chief logs
    result = {**FINAL, "objective": facts.objective}  # the chief's result.json
    assert lifecycle.objective(result) == (expected, FINAL[expected])
    job_cfg = compose(*overrides)  # the sweep composes the job again
    assert planning.run_objective({"params": params, "metrics": FINAL}, job_cfg) == FINAL[expected]
    # a run logged before the param existed: the facts as resolved now (None for a user's task)
    old = planning.run_objective({"params": {}, "metrics": FINAL}, job_cfg)
    assert old == (None if overrides == [USER_TASK] else FINAL[expected])


def task_name_compares(root) -> list:
    """`x == "seq2seq"`-like comparisons of a task's name under `root`, as "<file>:<line>"."""
    import ast

    from distexp.options import tasks as records

    names = set(records.REGISTRY)
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value in names
                    for c in (node.left, *node.comparators)):
                out.append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def test_tasks_are_records_and_no_name_is_compared(tmp_path):
    """The user's task is one record among the built-ins (factory=True, as model=custom), and no
    module compares a task's name: it asks the record (distexp.options.tasks)."""
    from pathlib import Path

    from distexp import tasks

    assert [(r.name, r.factory) for r in tasks.REGISTRY.values()] == [
        ("classification", False), ("seq2seq", False), ("custom", True)]
    assert task_name_compares(Path(tasks.__file__).parents[1]) == []
    (tmp_path / "x.py").write_text('if name == "custom":\n    pass\nok = name == "other"\n')
    assert task_name_compares(tmp_path) == ["x.py:1"]
