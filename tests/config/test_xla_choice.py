"""jit_compile (auto, true, false) resolved before TensorFlow (distexp.config.xla) into the job's
facts: auto is XLA on GPU replicas for one_device, mirrored and multiworker, off on CPU replicas
and where the strategy says why (central, ps, tpu); true/false force it; a bad value is one line.
GPUs faked (the NVIDIA driver's list), no TensorFlow."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from distexp import errors
from distexp.config import checks, resolved, xla

GPU_ON = "jit_compile=auto: GPU replicas under strategy={}, whose step XLA compiles there " \
         "(jit_compile=false turns it off)"
CPU_OFF = "jit_compile=auto: CPU replicas: XLA measured no faster there on the default job " \
          "and its first step later (jit_compile=true forces it)"


@pytest.mark.parametrize("visible,overrides,on,why", [
    (2, ["strategy=mirrored"], True, GPU_ON.format("mirrored")),
    (1, ["strategy=one_device"], True, GPU_ON.format("one_device")),
    (4, ["strategy=multiworker", "workers=2"], True, GPU_ON.format("multiworker")),
    (0, ["strategy=mirrored"], False, CPU_OFF),
    (0, ["strategy=mirrored", "cpu_replicas=2"], False, CPU_OFF),  # not refused: auto
    (2, ["strategy=mirrored", "gpus=0"], False, CPU_OFF),
    (1, ["strategy=multiworker", "workers=2"], False, CPU_OFF),  # too few GPUs: CPU workers
    (2, ["strategy=central"], False, "jit_compile=auto, strategy=central: with several GPUs "
        "CentralStorageStrategy keeps the variables on the CPU, which an XLA step on a GPU "
        "cannot reach; not measured with XLA on a GPU"),
    (2, ["strategy=ps"], False, "jit_compile=auto, strategy=ps: the step's variables live on "
        "the parameter servers, which XLA cannot reach from a worker"),
    (0, ["strategy=mirrored", "jit_compile=true"], True, "jit_compile=true"),
    (2, ["strategy=mirrored", "jit_compile=false"], False, "jit_compile=false"),
    (1, ["strategy=mirrored", "loop=fit"], False, "jit_compile=auto, loop=fit: Keras's own auto "
        "leaves XLA off under a tf.distribute strategy; not measured with XLA on a GPU "
        "(jit_compile=true forces it)"),
    (1, ["strategy=mirrored", "loop=fit", "jit_compile=true"], True, "jit_compile=true"),
])
def test_auto_chooses_per_device_kind_and_strategy(compose, gpus, visible, overrides, on, why):
    gpus(visible)
    found = checks.validate(compose(*overrides))
    assert (found.layout["jit_compile"], found.layout["jit_compile_why"]) == (on, why)


def test_the_default_is_auto_and_the_facts_carry_the_choice(compose, gpus):
    """The default job on a CPU machine: auto, XLA off; the trainers read the facts' choice
    (xla.on), not the key: the written `resolved:` node says it."""
    gpus(0)
    cfg = compose()
    assert cfg.jit_compile == "auto"
    resolved.attach(cfg, checks.validate(cfg).layout)
    stored = OmegaConf.create(OmegaConf.to_container(cfg))  # as config.yaml holds it
    assert xla.on(stored) is False and resolved.facts_of(stored).jit_compile_why == CPU_OFF
    gpus(1)
    cfg = compose("strategy=one_device")
    resolved.attach(cfg, checks.validate(cfg).layout)
    assert xla.on(cfg) is True


def test_a_config_without_facts_is_xla_only_when_forced():
    assert xla.on(OmegaConf.create({"jit_compile": "auto"})) is False
    assert xla.on(OmegaConf.create({"jit_compile": True})) is True


@pytest.mark.parametrize("overrides,line", [
    (["jit_compile=yes"], "jit_compile: received 'yes'; valid: auto, true or false"),
    (["jit_compile=1"], "jit_compile: received 1; valid: auto, true or false"),
    (["strategy=ps", "jit_compile=true"], "jit_compile: received true with strategy=ps"),
    (["jit_compile=true", "cpu_replicas=2", "gpus=0"], "jit_compile: received true with "
                                                       "cpu_replicas=2"),
])
def test_bad_or_refused_values_are_one_line(compose, gpus, overrides, line):
    gpus(0)
    with pytest.raises(errors.UserError) as ex:
        checks.validate(compose(*overrides))
    assert str(ex.value).startswith(line)


def test_the_line():
    assert xla.line(True, "jit_compile=true") == "XLA: on (jit_compile=true)"
    assert xla.line(False, CPU_OFF) == f"XLA: off ({CPU_OFF})"


@pytest.mark.parametrize("visible,overrides,line", [
    (0, ["xla_step=fused"], "xla_step: received 'fused'; valid: split or whole"),
    (0, ["xla_step=whole"], "xla_step: received 'whole' with XLA off (" + CPU_OFF + "); it "
        "shapes the XLA step only: set jit_compile=true or leave xla_step out"),
    (0, ["xla_step=whole", "jit_compile=true"], "xla_step: received 'whole' with "
        "strategy=mirrored on CPU replicas; TensorFlow refuses the optimizer's merge_call inside "
        "an XLA function there: use xla_step=split, strategy=one_device, or GPU replicas"),
    (1, ["xla_step=whole", "loop=fit"], "xla_step: received 'whole' with loop=fit; Keras fit "
        "compiles its own step: use loop=custom or leave xla_step out"),
])
def test_xla_step_whole_is_refused_where_it_cannot_compile(compose, gpus, visible, overrides,
                                                            line):
    gpus(visible)
    with pytest.raises(errors.UserError) as ex:
        checks.validate(compose(*overrides))
    assert str(ex.value) == line


@pytest.mark.parametrize("visible,overrides", [
    (1, ["xla_step=whole"]),  # mirrored on a GPU: auto is on
    (2, ["xla_step=whole", "strategy=multiworker", "workers=2"]),
    (0, ["xla_step=whole", "strategy=one_device", "jit_compile=true"]),
])
def test_xla_step_whole_is_accepted_where_it_compiles(compose, gpus, visible, overrides):
    gpus(visible)
    cfg = compose(*overrides)
    assert checks.validate(cfg).layout["jit_compile"] is True and cfg.xla_step == "whole"


SEQ = ["model=gru_seq2seq", "dataset=synthetic_pairs"]


@pytest.mark.parametrize("visible,overrides,refused", [
    (0, [*SEQ, "jit_compile=true"], True),  # its token count summed inside XLA: failed in training
    (0, [*SEQ, "jit_compile=true", "strategy=central"], True),
    (0, [*SEQ, "jit_compile=true", "strategy=one_device"], False),
    (0, [*SEQ], False),  # auto: off on CPU
    (0, ["jit_compile=true"], False),  # classification weighs by the batch: no sum inside XLA
    (1, [*SEQ, "jit_compile=true"], False),  # GPU replicas: TensorFlow skips the merge_call
])
def test_a_loss_weighted_across_cpu_replicas_is_refused_under_xla(compose, gpus, visible,
                                                                  overrides, refused):
    gpus(visible)
    cfg = compose(*overrides)
    if not refused:
        checks.validate(cfg)
        return
    with pytest.raises(errors.UserError) as ex:
        checks.validate(cfg)
    strategy = cfg.strategy.name
    assert str(ex.value) == (
        f"jit_compile: received true with the seq2seq task and strategy={strategy} on CPU "
        "replicas; its loss sums the replicas' token counts, which TensorFlow refuses inside an "
        "XLA function there: use strategy=one_device or jit_compile=false")
