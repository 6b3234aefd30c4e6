"""`precision=mixed_float16` proven on the traced training step, not assumed: the default job's
model and optimizer built as the trainer builds them, the custom loop's one-step function traced
(not run) for a replica on `/gpu:0` (tracing needs no GPU: the graph records the devices its
ops ask for). Every convolution and matmul, forward and backward, computes in half; the variables
stay float32; loss scaling adds no Python call and no op on the host."""
from __future__ import annotations

import collections

import pytest

pytestmark = [pytest.mark.integration,  # TensorFlow in this process
              pytest.mark.xdist_group("step-tracing")]

# the ops that do a step's arithmetic on a GPU's tensor cores, and their bias adds
COMPUTE = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D", "MatMul",
           "BatchMatMulV2", "BatchMatMulV3", "DepthwiseConv2dNative",
           "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
           "BiasAdd", "BiasAddGrad"}
VARIABLE_OPS = {"ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp",
                "AssignSubVariableOp", "ResourceGather", "VarHandleOp"}
HOST_CALLS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
REPLICA = "/job:localhost/replica:0/task:0/device:GPU:0"


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


_TRACED: dict = {}


def _traced(tf, compose, precision):
    """(every node of the one-step function's graph and of the functions it calls, the model),
    traced once per precision in this module."""
    if precision not in _TRACED:
        _TRACED[precision] = _trace(tf, compose, precision)
    return _TRACED[precision]


def _trace(tf, compose, precision):
    import keras

    from distexp import tasks
    from distexp.data import loaders
    from distexp.train import optimizer as optimizers
    from distexp.train.step import Step

    cfg = compose(f"precision={precision}")
    keras.mixed_precision.set_global_policy(cfg.precision)  # as the trainer sets it
    try:
        task, data = tasks.get(cfg), loaders.load(cfg)
        strategy = tf.distribute.OneDeviceStrategy("/gpu:0")
        with strategy.scope():
            model = task.build_model(cfg, data)
            opt = optimizers.build(cfg, model, 1e-3)
        step = Step(strategy, task, model, opt, global_batch=64)
        x, y = next(iter(loaders.pipelines(cfg, data, 64)[0]))
        graph = step.one.get_concrete_function(tf.TensorSpec.from_tensor(x),
                                               tf.TensorSpec.from_tensor(y)).graph.as_graph_def()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return nodes, model


def _dtype(node):
    return node.attr["T"].type if "T" in node.attr else node.attr["dtype"].type


def test_mixed_float16_computes_in_half_and_keeps_float32_variables(tf, compose):
    nodes, model = _traced(tf, compose, "mixed_float16")
    compute = [n for n in nodes if n.op in COMPUTE]
    kinds = collections.Counter(n.op for n in compute)
    # forward and backward of the convolution and of the dense layers
    assert {"Conv2D", "Conv2DBackpropFilter", "MatMul", "BiasAdd", "BiasAddGrad"} <= set(kinds)
    not_half = [(n.op, tf.dtypes.as_dtype(_dtype(n)).name) for n in compute
                if _dtype(n) != tf.float16.as_datatype_enum]
    assert not_half == [], not_half

    assert {v.dtype for v in model.trainable_variables} == {"float32"}
    variable_ops = [n for n in nodes if n.op in VARIABLE_OPS]
    assert variable_ops
    assert not [n.op for n in variable_ops if _dtype(n) == tf.float16.as_datatype_enum]


def test_loss_scaling_adds_no_python_call_and_no_host_op(tf, compose):
    """No py_function, and every op asks for the replica's GPU or inherits its caller's device (no
    op pinned to the host). What loss scaling adds: two conds (are all gradients finite; double the
    scale now?), each an `If` on the GPU, none under float32."""
    for precision, conds in (("mixed_float16", 2), ("float32", 0)):
        nodes, _ = _traced(tf, compose, precision)
        assert not [n.op for n in nodes if n.op in HOST_CALLS], precision
        elsewhere = {(n.op, n.device) for n in nodes if n.device not in ("", REPLICA)}
        assert elsewhere == set(), (precision, elsewhere)
        ifs = [n for n in nodes if n.op in ("If", "StatelessIf")]
        assert len(ifs) == conds, (precision, [n.name for n in ifs])


def test_float32_computes_in_float32(tf, compose):
    """The check above can tell: under float32 the same ops compute in float32."""
    nodes, _ = _traced(tf, compose, "float32")
    assert {_dtype(n) for n in nodes if n.op in COMPUTE} == {tf.float32.as_datatype_enum}
