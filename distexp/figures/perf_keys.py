"""Every `perf/*` metric name distexp logs or reads, in one place (a leaf): the trainer's meter,
probes and progress lines write them; the display, the report and the objective's choices read
them. What each one means: docs/tasks-and-figures.md."""

# the timed steps' throughput (distexp.figures.meter)
EXAMPLES_PER_SEC = "perf/examples_per_sec"
EXAMPLES_PER_SEC_PER_REPLICA = "perf/examples_per_sec_per_replica"
EXAMPLES_PER_SEC_CI95 = "perf/examples_per_sec_ci95"
EXAMPLES_PER_SEC_END_TO_END = "perf/examples_per_sec_end_to_end"
STEP_TIME_MS_P50 = "perf/step_time_ms_p50"
STEP_TIME_MS_P90 = "perf/step_time_ms_p90"
TIME_TO_FIRST_STEP_S = "perf/time_to_first_step_s"
TIMED_STEPS = "perf/timed_steps"
INPUT_WAIT_SHARE = "perf/input_wait_share"
# the step-time split's noise and the factor its measured parts were scaled by (figures.breakdown)
STEP_SPLIT_NOISE_MS = "perf/step_split_noise_ms"
STEP_SPLIT_SCALE = "perf/step_split_scale"
# per epoch (a series)
EPOCH_EXAMPLES_PER_SEC = "perf/epoch_examples_per_sec"
EPOCH_EXAMPLES_PER_SEC_PER_REPLICA = "perf/epoch_examples_per_sec_per_replica"
EPOCH_TIME_S = "perf/epoch_time_s"
# the run's progress (distexp.train.progress)
TIME_TO_ACCURACY_S = "perf/time_to_accuracy_s"
EVAL_ACCURACY = "eval/accuracy"  # the final eval accuracy a sweep's accuracy half compares
# the hardware, after training (distexp.train.hardware)
PEAK_HOST_MEMORY_MB = "perf/peak_host_memory_mb"
PEAK_GPU_MEMORY_MB = "perf/peak_gpu_memory_mb"
MATMUL_FLOPS = "perf/matmul_flops"
FLOPS_PER_EXAMPLE = "perf/flops_per_example"
PEAK_FLOPS = "perf/peak_flops"
MFU = "perf/mfu"


def units_per_sec(units: str) -> str:
    """A task's own units (tokens) per second over the timed steps."""
    return f"perf/{units}_per_sec"


def units_of(key: str):
    """The task's own units of a `units_per_sec` key (`perf/tokens_per_sec` -> "tokens"); None for
    every other key (examples/s, the per-epoch series, matmul FLOP/s)."""
    if not (key.startswith("perf/") and key.endswith("_per_sec")) or key.startswith("perf/epoch_"):
        return None
    units = key[len("perf/"):-len("_per_sec")]
    return units if "_" not in units and key not in (EXAMPLES_PER_SEC, MATMUL_FLOPS) else None


def epoch_units_per_sec(units: str) -> str:
    return f"perf/epoch_{units}_per_sec"


def step_part_ms(part: str) -> str:
    """One part of the step-time split (distexp.figures.breakdown.PARTS)."""
    return f"perf/step_{part}_ms"
