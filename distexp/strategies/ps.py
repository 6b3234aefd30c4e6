"""ps: tf.distribute.experimental.ParameterServerStrategy: a coordinator (the chief: schedules steps,
evaluates, logs) + `workers` worker servers + `ps` parameter servers. Asynchronous: each step runs
on one worker with the whole global batch and updates the variables on the ps. Steps are
dispatched by ClusterCoordinator.schedule (distexp.train.step.PSDispatch), the same step as the others.
Keras 3 has no ps support in fit (keras-team/keras#18624)."""
from __future__ import annotations

from distexp.errors import UserError
from distexp.strategies.record import Record, StrategyConfig, register


@register
class ParameterServer(Record):
    name = "ps"
    schema = StrategyConfig
    # a coordinator (the chief: schedules, evaluates, logs) + worker and ps servers
    cluster_jobs = (("chief", None), ("worker", "workers"), ("ps", "ps"))
    server_roles = ("worker", "ps")
    synchronous = False
    coordinated = True
    loops = {"custom": None,
             "fit": "Keras 3 fit cannot train it (no ps support: keras-team/keras#18624)"}
    refuses = {
        "jit_compile": "the step's variables live on the parameter servers, which XLA cannot "
                       "reach from a worker",
        "dataset.on_device": "ps steps are scheduled on remote workers, where no batch stays "
                             "between scheduled calls",
    }

    def check(self, cfg):
        if cfg.ps < 1:
            raise UserError(f"ps: received {cfg.ps}; strategy=ps needs at least 1 parameter server")

    def resolver(self, cfg, gpus, cluster):
        return cluster.resolver(cfg, self, gpus)

    def build(self, cfg, devices, resolver=None):
        import tensorflow as tf

        # Called on the coordinator only; worker and ps tasks serve (distexp.strategies.serve).
        return tf.distribute.experimental.ParameterServerStrategy(resolver)
