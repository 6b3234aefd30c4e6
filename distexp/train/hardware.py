"""Figures about the hardware, measured once training is over (FLOPs per example, the devices'
peak FLOP/s and MFU, peak host and GPU memory), so that they cost nothing before the first step."""
from __future__ import annotations

from distexp.console_lines import DETAIL
from distexp.figures import perf_keys
from distexp.tracking import tags as tag


def after_training(cfg, record, model, input_shape, replica_devices, examples_per_sec, chief,
                   logger) -> dict:
    """Figures measured once training is over, so they cost nothing before the first step:
    FLOPs per example, the devices' peak FLOP/s and MFU, peak host (and GPU) memory. The peak is
    a constant of the hardware with its source (tag distexp.peak_source): a known GPU's datasheet
    figure (another GPU's measured once by a matmul probe and cached, said on the console:
    distexp.figures.measured_peak), or the CPU's theoretical peak from /proc/cpuinfo
    (distexp.figures.cpu_peak); when none applies there is no MFU, said in one line.
    `measure_peak_flops=true` also logs what a matmul benchmark achieved (perf/matmul_flops),
    never the denominator: it moves with the machine's load.
    `record`: the job's strategy record, as the trainer built it (distexp.strategies)."""
    import resource

    import tensorflow as tf

    from distexp.figures import flops
    from distexp.figures.meter import mfu

    out = {perf_keys.PEAK_HOST_MEMORY_MB: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    gpus = [d for d in replica_devices if d.startswith("/gpu")]
    if gpus:
        out[perf_keys.PEAK_GPU_MEMORY_MB] = sum(
            tf.config.experimental.get_memory_info(d.replace("/gpu", "GPU"))["peak"]
            for d in gpus) / 2 ** 20
    if not chief:
        return out
    try:
        per_example = flops.train_flops_per_example(model, input_shape)
    except Exception as ex:  # noqa: BLE001  (a user model the profiler cannot trace)
        print("FLOPs not counted: TensorFlow's profiler could not trace this model, so perf/mfu "
              "is not logged (the reason is in the chief's log)", flush=True)
        print(DETAIL + "FLOPs: " + f"{type(ex).__name__}: {ex}".replace("\n", " | "),
              flush=True)  # log only (distexp.job.launch.LOG_ONLY)
        per_example = None
    peak, why_not = _peak(cfg, record, gpus, per_example)
    if peak is None:
        print(f"{perf_keys.MFU} not logged: {why_not}", flush=True)
    else:
        logger.set_tags({tag.PEAK_SOURCE: peak[1]})
    value = None if peak is None else peak[0]
    if cfg.measure_peak_flops:
        out[perf_keys.MATMUL_FLOPS] = flops.peak_flops(replica_devices)
    out.update({perf_keys.FLOPS_PER_EXAMPLE: per_example, perf_keys.PEAK_FLOPS: value,
                perf_keys.MFU: mfu(per_example, examples_per_sec, value)})
    return out


def _peak(cfg, record, gpus, per_example):
    """((FLOP/s, source) or None, why there is none): the GPUs' datasheet or measured peak
    (distexp.figures.measured_peak: a measured one is said on the console), else the CPUs'
    theoretical one where every process of the job runs on this machine."""
    import tensorflow as tf

    from distexp.cluster import kinds

    peak, why_not = None, None
    if gpus:
        from distexp.figures import measured_peak

        names = [tf.config.experimental.get_device_details(d).get("device_name", "")
                 for d in tf.config.list_physical_devices("GPU")[:len(gpus)]]
        value, source, line = measured_peak.job_peak(names, gpus, cfg.precision,
                                                     probe_allowed=per_example is not None)
        peak = None if value is None else (value, source)
        if line and peak is not None:  # a measured peak: said, never silent
            print(line, flush=True)
        why_not = line
    elif kinds.of(cfg).spans_machines(cfg, record):
        why_not = (f"cluster={kinds.of(cfg).name}: the job's processes may span machines whose "
                   "processors this process cannot see")
    else:  # every process of the job runs on this machine's CPUs
        from distexp.figures.cpu_peak import machine_cpu_peak

        peak = machine_cpu_peak()
        why_not = "no peak rule for this processor (distexp.figures.cpu_peak)"
    return peak, why_not
