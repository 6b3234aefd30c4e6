"""`jit_compile` (auto, true, false): whether the training step is XLA-compiled, decided once in
the job process before TensorFlow starts (`choose`, from the strategy's record and the GPUs each
replica-holding process trains on) and stored in the job's facts (`resolved:` node:
`jit_compile`, `jit_compile_why`), which every training process and loop reads.

auto: XLA on GPU replicas for the strategies whose step XLA compiles there (one_device,
mirrored, multiworker: TensorFlow skips the optimizer's merge_call on all-GPU replicas); off on
CPU replicas (the default job measured no faster with XLA on a 2-core CPU, and its first step
0.6-1.3 s later, docs/gpus.md#jit_compile-auto), off where the strategy says why not (its
record's `xla_off`, or `refuses` jit_compile) and with loop=fit (Keras's own auto is off under a
strategy; not measured with XLA on a GPU). true / false force it (true is refused where it
cannot compile: distexp.config.checks). No TensorFlow here."""
from __future__ import annotations

from typing import Any, Tuple

from distexp.errors import UserError
from distexp.options import loops

VALUES = ("auto", "true", "false")
STEPS = ("split", "whole")  # xla_step: what the XLA function holds (distexp.train.step.Step)
ON_CPU = ("CPU replicas: XLA measured no faster there on the default job and its first step "
          "later (jit_compile=true forces it)")


def value(raw: Any) -> str:
    """The key as one of VALUES (`jit_compile=true` reaches the config as the bool True)."""
    return str(raw).lower() if isinstance(raw, bool) else str(raw).strip().lower()


def choose(raw: Any, rec, gpus: int, loop=None) -> Tuple[bool, str]:
    """(XLA on, why) for `jit_compile` = `raw` under the strategy record `rec`, each
    replica-holding process training on `gpus` GPUs (0: CPU replicas), in the loop record `loop`
    (distexp.options.loops; None: distexp's own step)."""
    v = value(raw)
    if v != "auto":
        return v == "true", f"jit_compile={v}"
    refused = rec.refuses.get("jit_compile")
    if refused:
        return False, f"jit_compile=auto, strategy={rec.name}: {refused}"
    if rec.xla_off:
        return False, f"jit_compile=auto, strategy={rec.name}: {rec.xla_off}"
    if gpus <= 0:
        return False, f"jit_compile=auto: {ON_CPU}"
    if loop is not None and not loop.own_step:
        return False, (f"jit_compile=auto, loop={loop.name}: Keras's own auto leaves XLA off under a "
                       "tf.distribute strategy; not measured with XLA on a GPU (jit_compile=true "
                       "forces it)")
    return True, (f"jit_compile=auto: GPU replicas under strategy={rec.name}, whose step XLA "
                  "compiles there (jit_compile=false turns it off)")


def line(on: bool, why: str) -> str:
    """The job's one line saying what it chose and why."""
    return f"XLA: {'on' if on else 'off'} ({why})"


def on(cfg) -> bool:
    """Whether this job's step is XLA-compiled: its facts' choice (the `resolved:` node); a config
    without facts (one built by hand) only with jit_compile=true."""
    node = cfg.get("resolved") if hasattr(cfg, "get") else None
    if node is not None and node.get("jit_compile") is not None:
        return bool(node.get("jit_compile"))
    return value(cfg.get("jit_compile", False)) == "true"


def check_step(cfg, rec, gpus: int) -> None:
    """`xla_step`: split or whole; whole only where it compiles (GPU replicas, or a strategy
    whose update has no merge_call on CPU: one_device), with XLA on, in the custom loop."""
    step = cfg.get("xla_step", "split")
    if step not in STEPS:
        raise UserError(f"xla_step: received {step!r}; valid: split or whole")
    if step == "split":
        return
    loop = loops.of(cfg)
    if not loop.own_step:
        raise UserError(f"xla_step: received 'whole' with loop={cfg.loop.name}; Keras fit "
                        f"compiles its own step: use {loops.able('own_step')} or leave xla_step "
                        "out")
    on, why = choose(cfg.jit_compile, rec, gpus, loop)
    if not on:
        raise UserError(f"xla_step: received 'whole' with XLA off ({why}); it shapes the XLA "
                        "step only: set jit_compile=true or leave xla_step out")
    if gpus <= 0 and not rec.xla_whole_on_cpu:
        raise UserError(f"xla_step: received 'whole' with strategy={rec.name} on CPU replicas; "
                        "TensorFlow refuses the optimizer's merge_call inside an XLA function "
                        "there: use xla_step=split, strategy=one_device, or GPU replicas")
