"""A user's own data or model that is wrong inside training: one line that names the
key or factory, what it gave and what is valid; exit 2; the run FAILED with that line as its
reason (tag distexp.error, and the description); the traceback in the job's log only.

Tier: integration. Every case of CASES through `distexp.train.trainer.train(cfg)` in ONE fresh
Python process (one TensorFlow start for all; pytest's own process may hold another TF runtime),
and a few through the CLI to prove the exit code, the console, the run's status and reason, the
log.
The translation on exceptions made here: tests/train/test_training_errors_unit.py; keras-io's softmax
convnet trained: tests/train/test_training_errors_slow.py.

The cases (tests/helpers/user_code/bad_factories.py): each wrong thing is found BEFORE the first step (no
steps.csv yet) unless marked IN_STEP, where only the data itself can tell (a tf.data pipeline's
labels, a model's own code).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from helpers import CONF, child_env, mlflow_runs, processes_mentioning

pytestmark = pytest.mark.integration
DATA = ["dataset=custom", "model=mlp"]
IN_STEP = "in-step"  # found by TensorFlow while the first step runs, then translated
BASE = ["strategy=one_device", "gpus=0", "epochs=1", "steps_per_epoch=2", "warmup_steps=0",
        "batch_size_per_replica=16", "tracking.enabled=false", "measure_step_split=false",
        "measure_peak_flops=false", "checkpoint.every_steps=0"]
F = "bad_factories"


def data(fn, *more):
    return [*DATA, f"dataset.factory={F}:{fn}", *more]


def model(fn):
    return ["model=custom", f"model.factory={F}:{fn}"]


# (id, overrides, the line (its start), when)
CASES = [
    # labels of the wrong kind
    ("digit-strings", data("digit_strings"),
     f"dataset.factory: {F}:digit_strings returned y_train of text (e.g. '0', '1', '2', dtype "
     "<U21); valid: integer class ids 0..num_classes-1 (digits as text: y.astype(int)", None),
    ("class-names", data("class_names"),
     f"dataset.factory: {F}:class_names returned y_train of text (e.g. 'bird', 'cat', 'dog', "
     "dtype <U4); valid: integer class ids 0..num_classes-1 (class names: names, y = "
     "np.unique(y, return_inverse=True)", None),
    ("float-labels", data("float_labels"),
     f"dataset.factory: {F}:float_labels returned y_train of dtype float32 (e.g. 2, 1, 1); valid "
     "for classification: integer class ids 0..num_classes-1 (y.astype(int) if they are ids; a "
     "regression needs a task of its own: task.factory)", None),
    ("fractional-labels", data("fractional_labels"),
     f"dataset.factory: {F}:fractional_labels returned y_train of dtype float32 (e.g. 1, 0.5, "
     "0.5); valid for classification: integer class ids", None),
    # labels outside the classes
    ("negative-labels", data("negative_labels"),
     f"labels: received -1 with 2 classes (num_classes=2 from {F}:negative_labels); valid: class "
     "ids 0..1", None),
    ("labels-beyond-classes", data("labels_beyond_classes"),
     f"labels: received 2 with 2 classes (num_classes=2 from {F}:labels_beyond_classes); valid: "
     "class ids 0..1: raise num_classes to the number of classes, or fix the labels", None),
    ("tfdata-beyond-classes", data("tfdata_beyond_classes", "dataset.num_classes=2"),
     f"labels: received 2 with 2 classes (dataset.num_classes=2, labels from "
     f"{F}:tfdata_beyond_classes); valid: class ids 0..1", IN_STEP),
    ("tfdata-one-label-beyond", data("tfdata_one_label_beyond", "dataset.num_classes=2",
                                            "dataset.shuffle_buffer=1"),
     f"labels: received 9 with 2 classes (dataset.num_classes=2, labels from "
     f"{F}:tfdata_one_label_beyond); valid: class ids 0..1", IN_STEP),
    # labels not one per example
    ("one-hot-labels", data("one_hot_labels"),
     f"dataset.factory: {F}:one_hot_labels returned y_train of shape (256, 3): (3,) per example; "
     "valid for classification: one class id per example, shape (n,) (one-hot labels: "
     "y.argmax(axis=-1))", None),
    ("eval-labels-one-hot", data("eval_labels_one_hot"),
     f"dataset.factory: {F}:eval_labels_one_hot returned y_eval of shape (64, 3)", None),
    ("tfdata-one-hot", data("tfdata_one_hot"),
     f"dataset.factory: {F}:tfdata_one_hot returned the training dataset's labels of shape "
     "(None, 3): (3,) per example", None),
    # the same kinds through tf.data
    ("tfdata-strings", data("tfdata_strings"),
     f"dataset.factory: {F}:tfdata_strings returned a training dataset whose labels are strings",
     None),
    ("tfdata-float-labels", data("tfdata_float_labels"),
     f"dataset.factory: {F}:tfdata_float_labels returned the training dataset's labels of dtype "
     "float32; valid for classification: integer class ids", None),
    # inputs that are not finite numbers; no examples
    ("nan-inputs", data("nan_inputs"),
     f"dataset.factory: {F}:nan_inputs returned x_train with 2 NaN value(s) in 2 example(s) (the "
     "first: example 17); valid: finite numbers", None),
    ("inf-eval-inputs", data("inf_eval_inputs"),
     f"dataset.factory: {F}:inf_eval_inputs returned x_eval with 1 inf value(s) in 1 example(s) "
     "(the first: example 5)", None),
    ("no-examples", data("no_examples"),
     f"dataset.factory: {F}:no_examples returned no training examples (x_train of shape (0, 8, "
     "8, 1)); valid: at least one training example", None),
    ("no-eval-examples", data("no_eval_examples"),
     f"dataset.factory: {F}:no_eval_examples returned no evaluation examples", None),
    ("tfdata-empty", data("tfdata_empty"),
     f"dataset.factory: {F}:tfdata_empty returned an empty training dataset (0 examples)", None),
    # the user's own pipeline code fails: its own message, the factory named
    ("tfdata-fails", data("tfdata_fails"),
     f"dataset.factory: {F}:tfdata_fails failed in its tf.data pipeline: InvalidArgumentError: "
     "assertion failed: [the pipeline check failed]", IN_STEP),
    # models that do not match the data (digits: 8x8x1, 10 classes)
    ("model-input-shape", model("cifar_cnn"),
     f"model.factory: {F}:cifar_cnn expects input (32, 32, 3); the dataset gives (8, 8, 1) "
     "(dataset: digits)", None),
    ("model-input-rank", model("flat_mlp"),
     f"model.factory: {F}:flat_mlp expects input (64,); the dataset gives (8, 8, 1)", None),
    ("model-classes", model("five_classes"),
     f"model.factory: {F}:five_classes outputs shape (None, 5) for 10 classes; valid: (batch, "
     "10), one logit per class", None),
    ("model-no-flatten", model("no_flatten"),
     f"model.factory: {F}:no_flatten outputs shape (None, 8, 8, 10) for 10 classes", None),
    ("model-binary-head", model("sigmoid_one"),
     f"model.factory: {F}:sigmoid_one outputs shape (None, 1) for 10 classes", None),
    ("model-two-outputs", model("two_outputs"),
     f"model.factory: {F}:two_outputs outputs 2 tensors; valid for classification: one, of "
     "shape (batch, 10)", None),
    # the model's own code fails in the first step: its own message, the factory and the line
    ("model-own-code", model("buggy_layer"),
     f"model.factory: {F}:buggy_layer failed in training: ValueError: my layer does not handle "
     "batches yet (at bad_factories.py:", IN_STEP),
]

RUNNER = """
import json, os, sys, time
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from distexp.config import checks, resolved, schema
from distexp.train.trainer import train

schema.register()
conf, jobs, cases, base = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
for name, overrides in cases:
    job = os.path.join(jobs, name)
    os.makedirs(job)
    with initialize_config_dir(version_base="1.3", config_dir=conf):
        cfg = compose(config_name="config", overrides=base + overrides)
    GlobalHydra.instance().clear()
    t = time.time()
    try:
        checks.validate(cfg)
        resolved.attach(cfg, resolved.resolve(cfg, job_dir=job))
        train(cfg, job)
        out = {"type": None}
    except Exception as ex:
        out = {"type": type(ex).__name__, "line": str(ex), "cause": ex.__cause__ is not None,
               "cause_text": str(ex.__cause__)[:3000]}
    out["seconds"] = time.time() - t
    print("CASE " + json.dumps([name, out]), flush=True)
"""


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """Every case through train(cfg), in one fresh process: {id: outcome}, and the jobs' dir."""
    tmp = tmp_path_factory.mktemp("training_errors")
    env = {k: v for k, v in child_env(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="").items()
           if not k.startswith("DISTEXP_")}
    cases = [[i, args] for i, args, _, _ in CASES]
    p = subprocess.run([sys.executable, "-c", RUNNER, str(CONF), str(tmp / "jobs"),
                        json.dumps(cases), json.dumps(BASE)], cwd=tmp, env=env,
                       capture_output=True, text=True, timeout=900)
    outcomes = dict(json.loads(ln[len("CASE "):]) for ln in p.stdout.splitlines()
                    if ln.startswith("CASE "))
    assert p.returncode == 0 and len(outcomes) == len(CASES), p.stderr[-3000:]
    return outcomes, tmp / "jobs"


@pytest.mark.parametrize("case,args,line,when", [pytest.param(*c, id=c[0]) for c in CASES])
def test_one_line_inside_training(in_process, case, args, line, when):
    outcomes, jobs = in_process
    out = outcomes[case]
    assert out["type"] == "UserError", out  # the trainer's exit 2, its line in user-error.txt
    assert out["line"].startswith(line), out
    assert "\n" not in out["line"]
    # names the key or the factory, and what it received
    assert re.match(r"(labels: received |(dataset|model)\.factory: bad_factories:\w+ )",
                    out["line"]), out
    if case.startswith("tfdata-") and "beyond" in case:  # found by the range check mapped over the pipeline's
        #                                   labels (as on a GPU, whose sparse cross-entropy never
        #                                   checks), not by the CPU kernel's own check
        from distexp.tasks.preflight import RANGE_MARK

        assert RANGE_MARK in out["cause_text"], out
    steps = jobs / case / "steps.csv"
    if when == IN_STEP:  # translated from TensorFlow's exception, which stays attached (the log)
        assert out["cause"], out
        assert steps.exists() and len(steps.read_text().splitlines()) <= 1, "no step may finish"
    else:  # found before the first step: the step's reporter was never made
        assert not steps.exists(), f"{case}: found only after training started"


# --- through the CLI: the exit code, the console, the run and its reason, the log --------------

THROUGH_CLI = ["labels-beyond-classes", "tfdata-beyond-classes", "model-input-shape",
               "model-own-code"]


@pytest.mark.parametrize("case", THROUGH_CLI)
def test_one_line_through_the_cli(cli, case):
    args, line, when = next((a, ln, w) for i, a, ln, w in CASES if i == case)
    r = cli(*args, "epochs=1", "steps_per_epoch=3", env={"CUDA_VISIBLE_DEVICES": ""},
            timeout=300)
    assert r.returncode == 2, r
    assert "Traceback" not in r.out, r
    errors = [ln for ln in r.out.splitlines() if re.search(r"error", ln, re.I)]
    assert len(errors) == 1 and errors[0].startswith(f"distexp: error: {line}"), r
    said = errors[0][len("distexp: error: "):]
    _, runs = mlflow_runs(cli.uri)
    assert [run.info.status for run in runs] == ["FAILED"], r
    tags = runs[0].data.tags
    assert tags["distexp.error"] == said
    assert tags["mlflow.note.content"].startswith(f"**Failed:** {said}")
    job = next((cli.cwd / "outputs" / "runs").glob("*/*"))
    log = (job / "chief.log").read_text()
    if when == IN_STEP:  # the whole traceback in the log, and the line says where
        assert "distexp: detail: Traceback (most recent call last)" in log
        assert said.endswith(f" (traceback: {job / 'chief.log'})"), said
    assert processes_mentioning(str(cli.cwd)) == [], "a process was left behind"
