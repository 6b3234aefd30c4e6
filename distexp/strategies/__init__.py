"""Strategies: one record per strategy (Lightning's strategy registry is the model).

A record (`Record` subclass, one module each: one_device.py, mirrored.py, central.py,
multiworker.py, ps.py, tpu.py) holds everything distexp knows about a strategy, in one place:
its process layout (one process; `workers` worker processes; a coordinator + worker + ps
servers), replicas per worker, sync or async, which loops it supports and why not, which knobs
it refuses and why, its `strategy.*` keys (`schema`), its device rule, its checks before
TensorFlow starts, its cluster resolver and its builder. Nothing else in distexp compares
strategy names as strings: adding a strategy is its record and its `conf/strategy/<name>.yaml`.
A strategy of your own lives outside distexp: its yaml names the module that registers its
record (`record: my_pkg.my_strategy`), imported before the name is looked up (`of`).

Importing this package does not import TensorFlow (the job process validates with it); builders
import it when called. The order that matters stays visible in distexp.train.trainer: the cluster
resolver (it may set CUDA_VISIBLE_DEVICES), devices, then the strategy, then the model and
optimizer inside ``strategy.scope()``.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from omegaconf import DictConfig

from distexp.strategies.record import REGISTRY, Record, register  # noqa: F401  (the records' API)


def of(cfg: DictConfig) -> Record:
    """The record of `cfg`'s strategy; `strategy.record` (a module path) is imported first, so a
    strategy defined outside distexp registers itself."""
    return REGISTRY.load(cfg.strategy.name, cfg.strategy.get("record"))


def baseline() -> Record:
    """The one-replica reference (the record with `baseline`): the report's baseline, the
    sweep's equal-work controls and distexp.parity's reference."""
    return next(r for r in REGISTRY.values() if r.baseline)


def option_values() -> Dict[str, Tuple[str, ...]]:
    """`strategy.<option>` -> its valid values, from the records that take it."""
    return {k: v for r in REGISTRY.values() for k, v in r.option_values.items()}


def names() -> Tuple[str, ...]:
    """In the contract's order (one_device, mirrored, central, multiworker, ps, ...)."""
    return tuple(REGISTRY)


def build(cfg: DictConfig, devices: List[str], resolver=None):
    with grpc_errors(resolver):
        return of(cfg).build(cfg, devices, resolver=resolver)


class PortInUse(Exception):
    """This task's gRPC server could not listen on its port (another process holds it)."""


class grpc_errors:
    """Turn TensorFlow's "Could not start gRPC server" into PortInUse naming the address."""

    def __init__(self, resolver):
        self.resolver = resolver

    def __enter__(self):
        return self

    def __exit__(self, kind, ex, tb):
        if ex is not None and "Could not start gRPC server" in str(ex) and self.resolver is not None:
            r = self.resolver
            addr = r.cluster_spec().task_address(r.task_type, r.task_id)
            raise PortInUse(f"{r.task_type}:{r.task_id} could not listen on {addr} (port in use?)") \
                from ex
        return False


def serve(resolver) -> None:
    """A ps worker or ps task: start its tf.distribute.Server and block in join() forever (no
    TensorFlow API stops it: the job process, or the engine, stops it when the coordinator is
    done)."""
    import tensorflow as tf

    with grpc_errors(resolver):
        server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                      task_index=resolver.task_id, protocol="grpc", start=True)
    gpus = len(tf.config.list_physical_devices("GPU"))  # what CUDA_VISIBLE_DEVICES leaves it
    print(f"{resolver.task_type}:{resolver.task_id} serving at {server.target} on "
          f"{f'{gpus} GPU(s)' if gpus else 'CPU'}", flush=True)
    server.join()


def is_chief(strategy, record: Record) -> bool:
    """True on the process that logs and prints: the only one, else the record's chief task of
    the built strategy's cluster (Record.chief_task)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    counts = {job: len(tasks) for job, tasks in resolver.cluster_spec().as_dict().items()}
    return record.is_chief_task(resolver.task_type, int(resolver.task_id or 0), counts)


# The records register themselves, in the contract's order.
from distexp.strategies import one_device, mirrored, central, multiworker, ps, tpu  # noqa: E402,F401  # isort: skip
