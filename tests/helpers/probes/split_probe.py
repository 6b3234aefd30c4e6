"""Run in a subprocess by tests/train/test_split_probes.py and tests/train/test_split_probes_slow.py (TensorFlow's
logical CPU devices are fixed once per process). Prints its result as one JSON line, last.

    python split_probe.py graphs <replicas> <optimizer> <precision>
        the collective ops of the traced training step (distexp.train.step.Step, the one-step
        and the k-step function) and of the sync and compute probes
        (distexp.train.split_probes.Probes), each as [op type, device, dtype, shape of what it
        reduces, communication hint], sorted: tiny model, MirroredStrategy over <replicas>
        logical CPUs (1: also OneDeviceStrategy)
    python split_probe.py ops overrides...
        the op types (with counts) of the forward and backward pass (distexp.train.step.
        forward_backward, XLA on so it is a function of its own) as the training step and the
        compute probe trace it, for the job of `overrides` (its task, model and optimizer): the
        loss part and the gradient part (the tape's ops) of each
    python split_probe.py train <job_dir> <delay_ms> overrides...
        one job trained in this process (distexp.train.trainer.train), with `delay_ms` of host
        time added to each call's fetch of its results (Step.host: the loop's round trip to the
        host, which the probes never make); prints the logged split and the timed steps' mean
"""
from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

COLLECTIVE = ("Collective", "Nccl")


def subgraphs(graph, seen=None):
    """`graph` and every function graph it calls (while loops' bodies and conditions, branches,
    nested tf.functions), once each."""
    seen = set() if seen is None else seen
    yield graph
    for op in graph.get_operations():
        for attr in ("body", "cond", "then_branch", "else_branch", "f"):
            try:
                fn = op.get_attr(attr)
            except (ValueError, TypeError):
                continue
            name = getattr(fn, "name", fn)
            if not isinstance(name, (str, bytes)) or name in seen:
                continue
            seen.add(name)
            sub = getattr(graph._get_function(name), "graph", None)
            if sub is not None:
                yield from subgraphs(sub, seen)


def collectives(concrete) -> list:
    out = []
    for g in subgraphs(concrete.graph):
        for op in g.get_operations():
            if any(c in op.type for c in COLLECTIVE):
                x = op.inputs[0]
                hint = op.get_attr("communication_hint").decode() \
                    if "communication_hint" in op.node_def.attr else ""
                out.append([op.type, op.device, x.dtype.name, x.shape.as_list(), hint])
    return sorted(out)


def graphs(replicas: int, optimizer: str, precision: str) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    from distexp.tasks.classification import Classification
    from distexp.train.split_probes import Probes
    from distexp.train.step import Step

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    keras.mixed_precision.set_global_policy(precision)
    strategies = {"mirrored": tf.distribute.MirroredStrategy(
        [f"/cpu:{i}" for i in range(replicas)])}
    if replicas == 1:
        strategies["one_device"] = tf.distribute.OneDeviceStrategy("/cpu:0")
    out = {}
    for name, strategy in strategies.items():
        with strategy.scope():
            model = keras.Sequential([keras.Input((6,)),
                                      keras.layers.Dense(7, activation="relu"),
                                      keras.layers.Dense(3, dtype="float32")])
            opt = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD}[optimizer](0.01)
            if precision == "mixed_float16":
                opt = keras.optimizers.LossScaleOptimizer(opt)
            opt.build(model.trainable_variables)
        task = Classification()
        batch = 4 * replicas
        ds = tf.data.Dataset.from_tensor_slices(
            (np.zeros((4 * batch, 6), "float32"), np.zeros(4 * batch, "int64"))).batch(batch)
        it = iter(strategy.experimental_distribute_dataset(ds))
        x, y = next(it)
        step = Step(strategy, task, model, opt, global_batch=batch)
        probes = Probes(strategy, task, model, opt, batch, one_step=step.one)
        k = tf.constant(2)
        grads = strategy.experimental_distribute_values_from_function(
            lambda _: [tf.zeros(v.shape, v.dtype) for v in model.trainable_variables])
        out[name] = {
            "one_step": collectives(step.one._function.get_concrete_function(x, y)),
            "k_steps": collectives(step.steps._function.get_concrete_function(it, k)),
            "sync": collectives(probes.sync.get_concrete_function(grads, k)),
            "compute": collectives(probes.compute.get_concrete_function(x, y, k)),
            "probe_one_step": probes.one_step is step.one,
            "elements": sum(v.shape.num_elements() for v in model.trainable_variables),
        }
    return out


def _compose(overrides):
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    import distexp
    from distexp.config import checks, schema

    schema.register()
    conf = Path(distexp.__file__).resolve().parent / "conf"
    with initialize_config_dir(version_base="1.3", config_dir=str(conf)):
        cfg = compose(config_name="config", overrides=[*overrides, "tracking.enabled=false"])
    checks.validate(cfg)
    return cfg


def _pass_ops(concrete) -> dict:
    """{"loss": ..., "gradient": ...}: {op type: count} of the forward_backward function that
    `concrete` calls (the tape's ops, named gradient_tape/..., are the gradient part)."""
    from collections import Counter

    found = [g for g in subgraphs(concrete.graph) if "forward_backward" in g.name]
    assert len(found) == 1, [g.name for g in subgraphs(concrete.graph)]
    ops = found[0].get_operations()
    tape = [op.type for op in ops if op.name.startswith("gradient_tape/")]
    return {"loss": dict(Counter(op.type for op in ops) - Counter(tape)), "gradient": dict(Counter(tape))}


def ops(overrides) -> dict:
    import keras
    import tensorflow as tf

    from distexp import tasks
    from distexp.data import loaders
    from distexp.train import optimizer as optimizers
    from distexp.train.split_probes import Probes
    from distexp.train.step import Step

    cfg = _compose(overrides)
    keras.mixed_precision.set_global_policy(cfg.precision)
    strategy, task, batch = tf.distribute.OneDeviceStrategy("/cpu:0"), tasks.get(cfg), 8
    data = loaders.load(cfg)
    train_ds, _ = loaders.pipelines(cfg, data, batch)
    with strategy.scope():
        model = task.build_model(cfg, data)
        opt = optimizers.build(cfg, model, 0.01)
    x, y = next(iter(strategy.experimental_distribute_dataset(train_ds)))
    step = Step(strategy, task, model, opt, batch, jit=True)
    probes = Probes(strategy, task, model, opt, batch, jit=True)  # no one_step: the probe's own
    return {"step": _pass_ops(step.one.get_concrete_function(x, y)),
            "probe": _pass_ops(probes.compute.get_concrete_function(x, y, tf.constant(2)))}


def train(job_dir: str, delay_ms: float, overrides) -> dict:
    from pathlib import Path

    from distexp.config import resolved
    from distexp.train import step, trainer

    Path(job_dir).mkdir(parents=True, exist_ok=True)
    cfg = _compose(overrides)
    resolved.attach(cfg, resolved.resolve(cfg, job_dir=job_dir))
    host = step.Step.host

    def slow_host(self, *a, **k):  # a round trip to the host that training makes per call
        time.sleep(delay_ms / 1000.0)
        return host(self, *a, **k)

    if delay_ms:
        step.Step.host = slow_host
    final = trainer.train(cfg, Path(job_dir))
    ctx, _ = trainer._FINISHED[-1]  # (ctx, the loop's dispatcher)
    timed = ctx.reporter.meter.timed
    return {**{k: v for k, v in final.items() if k.startswith("perf/step_")},
            "mean_step_ms": 1000.0 * sum(timed) / len(timed)}


def main() -> None:
    what = sys.argv[1]
    if what == "graphs":
        result = graphs(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif what == "ops":
        result = ops(sys.argv[2:])
    else:
        result = train(sys.argv[2], float(sys.argv[3]), sys.argv[4:])
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
