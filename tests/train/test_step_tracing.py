"""The training step as traced (distexp.train.step): plain TF, without autograph, computes what
autograph's trace computes; the k-step while loop equals k one-step calls; a user's task that
branches on a tensor in Python still trains (autograph is used for it). In this process, on one
CPU device, a tiny model: a few steps, seconds."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.integration,  # TensorFlow in this process
              pytest.mark.xdist_group("step-tracing")]


@pytest.fixture(scope="module", autouse=True)
def tensorflow_imported():
    """TensorFlow is imported when these tests run, not when the unit tier collects the file."""
    global tf, keras
    tf = pytest.importorskip("tensorflow")
    import keras


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)).astype("float32"), rng.integers(0, 3, size=n).astype("int64")


def _make_step(task, seed=0, strategy=None, jit=False, xla_step="split"):
    from distexp.train.step import Step

    strategy = strategy or tf.distribute.OneDeviceStrategy("/cpu:0")
    keras.utils.set_random_seed(seed)
    with strategy.scope():
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(3)])
        opt = keras.optimizers.SGD(0.1)
        opt.build(model.trainable_variables)
    return Step(strategy, task, model, opt, global_batch=8, jit=jit, xla_step=xla_step), strategy


def _iterator(strategy):
    x, y = _data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    return iter(strategy.experimental_distribute_dataset(ds))


def _one_step_losses(step, strategy, n=3):
    it = _iterator(strategy)
    return [step.host(*step.one(*next(it))).losses[0] for _ in range(n)]


def test_plain_trace_equals_autograph_trace():
    """The one-step function traced without autograph (what distexp runs) gives the same losses,
    to the last bit, as the same step traced with autograph (what it ran before)."""
    from distexp.tasks.classification import Classification

    step, strategy = _make_step(Classification())
    plain = _one_step_losses(step, strategy)
    assert step.one.autograph is False and step.one.experimental_get_tracing_count() == 1

    step, strategy = _make_step(Classification())
    step.one = tf.function(step._one_step, autograph=True)
    assert _one_step_losses(step, strategy) == plain


def test_k_steps_in_one_call_equal_k_one_step_calls():
    """The k-step function (a tf.while_loop) trains the same k steps as k one-step calls: the
    same per-step losses and the same metric sums."""
    from distexp.tasks.classification import Classification

    step, strategy = _make_step(Classification())
    it = _iterator(strategy)
    ones = [step.host(*step.one(*next(it))) for _ in range(3)]

    step, strategy = _make_step(Classification())
    k = step.host(*step.steps(_iterator(strategy), tf.constant(3)))
    assert k.losses == pytest.approx([o.losses[0] for o in ones], abs=1e-6)
    assert k.sums == pytest.approx([sum(v) for v in zip(*(o.sums for o in ones))], abs=1e-5)
    assert len(set(k.losses)) == 3  # three different steps, not one repeated


@pytest.mark.parametrize("make", [lambda: tf.distribute.MirroredStrategy(["/cpu:0"]),
                                  lambda: tf.distribute.OneDeviceStrategy("/cpu:0")],
                         ids=["mirrored", "one_device"])
def test_jit_compile_trains_the_same_steps_under_a_replica_context(make):
    """jit_compile=true (XLA) under a strategy whose update is a merge_call (mirrored): the k-step
    call trains, and its losses are those of the step without XLA. Before, the whole replica step
    was one XLA function with the optimizer's update inside, and TensorFlow refused the update's
    merge_call there ("`merge_call` called while defining a new graph"): every mirrored,
    multiworker or central job with jit_compile=true failed at its first step, on GPUs too."""
    from distexp.tasks.classification import Classification

    step, strategy = _make_step(Classification(), strategy=make(), jit=True)
    got = step.host(*step.steps(_iterator(strategy), tf.constant(3)))
    plain, strategy = _make_step(Classification(), strategy=make())
    want = plain.host(*plain.steps(_iterator(strategy), tf.constant(3)))
    assert len(set(got.losses)) == 3 and all(np.isfinite(got.losses))
    assert got.losses == pytest.approx(want.losses, rel=1e-4)


UPDATES = ("AssignSubVariableOp", "AssignAddVariableOp", "AssignVariableOp", "ResourceApply")


def _xla_and_rest(graph_def):
    """(op types inside the XLA-compiled functions, op types everywhere else) of a traced graph."""
    xla_names = {f.signature.name for f in graph_def.library.function
                 if f.attr["_XlaMustCompile"].b}
    inner = {n.op for f in graph_def.library.function if f.signature.name in xla_names
             for n in f.node_def}
    rest = {n.op for n in graph_def.node} | {
        n.op for f in graph_def.library.function if f.signature.name not in xla_names
        for n in f.node_def}
    return xla_names, inner, rest


def test_the_compute_probe_compiles_with_xla_what_the_trained_step_does():
    """jit_compile=true: the trained step (distexp.train.step) and the step-time split's compute
    probe (distexp.train.split_probes) each XLA-compile the forward and backward pass and run the
    optimizer's update outside it, so the probe times what training runs (before: the probe's
    XLA function held the update, the step's could not)."""
    from distexp.tasks.classification import Classification
    from distexp.train.split_probes import Probes

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
        opt = keras.optimizers.SGD(0.1)
        opt.build(model.trainable_variables)
    probes = Probes(strategy, Classification(), model, opt, 8, jit=True)
    x, y = (tf.constant(v) for v in _data(8))
    probe = probes.compute.get_concrete_function(x, y, tf.constant(2)).graph.as_graph_def()
    step, strategy = _make_step(Classification(), strategy=strategy, jit=True)
    trained = step.one.get_concrete_function(
        tf.TensorSpec.from_tensor(x), tf.TensorSpec.from_tensor(y)).graph.as_graph_def()
    for graph in (probe, trained):
        xla, inner, rest = _xla_and_rest(graph)
        assert xla and "MatMul" in inner  # the forward and backward pass: XLA
        assert not [op for op in inner if op.startswith(UPDATES)], inner
        assert [op for op in rest if op.startswith(UPDATES)]  # the update: outside it


def test_a_task_that_branches_on_a_tensor_in_python_still_trains():
    """A user's loss with `if <tensor>:` cannot be traced as plain TF
    (OperatorNotAllowedInGraphError); the step is traced again with autograph, once, and trains."""
    from distexp.tasks.classification import Classification

    class Branching(Classification):
        def loss(self, labels, outputs):
            total, count = super().loss(labels, outputs)
            if total > 0:  # a Python branch on a tensor: needs autograph
                total = total * 1.0
            return total, count

    step, strategy = _make_step(Branching())
    losses = _one_step_losses(step, strategy)
    assert step.one.autograph is True
    assert all(np.isfinite(losses)) and losses[0] != losses[-1]
    reference, strategy = _make_step(Classification())
    assert losses == pytest.approx(_one_step_losses(reference, strategy), abs=1e-6)


def test_one_replica_evaluates_its_batches_whole():
    """With one replica the evaluation batches go to strategy.run as they are (no distributed
    dataset to build an iterator for at every evaluation): the same figures as evaluating in this
    process, for every example once (24 examples in batches of 8, 8, 8)."""
    from distexp.tasks.classification import Classification
    from distexp.train.loops.evaluate import make_evaluate

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
    x, y = _data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    mirrored.experimental_distribute_dataset = lambda *a, **k: pytest.fail("distributed")
    got = make_evaluate(Classification(), model, ds, mirrored)()
    plain = make_evaluate(Classification(), model, ds)()
    assert got.keys() == plain.keys() == {"eval/loss", "eval/accuracy"}
    for k in got:
        assert got[k] == pytest.approx(plain[k], abs=1e-6), k


def test_a_task_that_takes_len_of_a_tensor_trains_and_evaluates():
    """len() of a batch of unknown size fails as plain TF with a TypeError, not only the
    OperatorNotAllowedInGraphError of a Python branch: the k-step loop (its batches come from the
    iterator inside the graph, size unknown) and evaluation (its signature's batch size is None)
    are traced again with autograph, and give the figures of the same task written in TF ops."""
    from distexp.tasks.classification import Classification
    from distexp.train.loops.evaluate import make_evaluate

    class WithLen(Classification):
        def loss(self, labels, outputs):
            total, _ = super().loss(labels, outputs)
            return total, tf.cast(len(labels), tf.float32)  # autograph: tf.shape(labels)[0]

    step, strategy = _make_step(WithLen())
    got = step.host(*step.steps(_iterator(strategy), tf.constant(3)))
    assert step.steps.autograph is True
    reference, strategy = _make_step(Classification())
    want = reference.host(*reference.steps(_iterator(strategy), tf.constant(3)))
    assert got.losses == pytest.approx(want.losses, abs=1e-6)

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
    x, y = _data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    evaluate = make_evaluate(WithLen(), model, ds, tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert evaluate() == pytest.approx(make_evaluate(Classification(), model, ds)())
    assert evaluate.traces() == 1  # the autograph function's one trace


def test_a_step_that_failed_while_running_is_not_run_again():
    """An error of a step that ran (TensorFlow's OpError, here a failed assertion) is raised as it
    is: no second trace with autograph, and the step ran once."""
    from distexp.tasks.classification import Classification

    ran = tf.Variable(0)

    class Refusing(Classification):
        def loss(self, labels, outputs):
            ran.assign_add(1)
            with tf.control_dependencies([tf.debugging.assert_less(labels, tf.cast(0, labels.dtype))]):
                return super().loss(labels, outputs)

    step, strategy = _make_step(Refusing())
    with pytest.raises(tf.errors.InvalidArgumentError):
        step.one(*next(_iterator(strategy)))
    assert step.one.autograph is False and int(ran.numpy()) == 1


def _graph(step, x, y):
    return step.one.get_concrete_function(
        tf.TensorSpec.from_tensor(x), tf.TensorSpec.from_tensor(y)).graph.as_graph_def()


def test_whole_step_xla_trains_the_same_steps_with_the_update_inside():
    """xla_step=whole (Model Garden's shape) under one_device: the k-step call trains the losses
    of the step without XLA (rel 1e-4), and the one XLA function holds the forward, backward and
    the optimizer's update; split keeps the update outside (the graphs' op types)."""
    from distexp.tasks.classification import Classification

    step, strategy = _make_step(Classification(), jit=True, xla_step="whole")
    got = step.host(*step.steps(_iterator(strategy), tf.constant(3)))
    plain, strategy = _make_step(Classification())
    want = plain.host(*plain.steps(_iterator(strategy), tf.constant(3)))
    assert len(set(got.losses)) == 3 and got.losses == pytest.approx(want.losses, rel=1e-4)
    x, y = (tf.constant(v) for v in _data(8))
    xla, inner, rest = _xla_and_rest(_graph(step, x, y))
    assert xla and "MatMul" in inner and [op for op in inner if op.startswith(UPDATES)], inner
    split, _ = _make_step(Classification(), jit=True, xla_step="split")
    xla, inner, rest = _xla_and_rest(_graph(split, x, y))
    assert not [op for op in inner if op.startswith(UPDATES)], inner
    assert [op for op in rest if op.startswith(UPDATES)]


def test_whole_step_xla_is_refused_by_tensorflow_under_mirrored_on_a_cpu():
    """Why distexp.config.xla.check_step refuses xla_step=whole on CPU replicas but one_device's:
    under mirrored on a CPU the update's merge_call inside the XLA function is an error
    (on all-GPU replicas TensorFlow skips it: the device run, benchmarks/gpu.sh, measures it)."""
    from distexp.tasks.classification import Classification

    step, strategy = _make_step(Classification(), strategy=tf.distribute.MirroredStrategy(
        ["/cpu:0"]), jit=True, xla_step="whole")
    with pytest.raises(RuntimeError, match="merge_call"):
        step.steps(_iterator(strategy), tf.constant(2))


def test_the_compute_probe_compiles_the_whole_step_when_the_step_does():
    """xla_step=whole: the compute probe's XLA function holds the update too, as the trained
    step's (the split times what training runs)."""
    from distexp.tasks.classification import Classification
    from distexp.train.split_probes import Probes

    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
        opt = keras.optimizers.SGD(0.1)
        opt.build(model.trainable_variables)
    probes = Probes(strategy, Classification(), model, opt, 8, jit=True, xla_step="whole")
    x, y = (tf.constant(v) for v in _data(8))
    graph = probes.compute.get_concrete_function(x, y, tf.constant(2)).graph.as_graph_def()
    xla, inner, _ = _xla_and_rest(graph)
    assert xla and "MatMul" in inner and [op for op in inner if op.startswith(UPDATES)], inner
