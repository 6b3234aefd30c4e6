"""Dense peak FLOP/s of known GPUs, per dtype, from the vendor's datasheets (no TensorFlow).

For `perf/mfu` on GPUs: MFU = model FLOPs x examples/s / peak. On CPU the peak is the processor's
theoretical one (distexp.figures.cpu_peak); a GPU's nominal peak comes from this table.
An unknown device, or a dtype the device has no figure for, gets None: distexp refuses to guess
(a wrong denominator makes MFU meaningless), and no MFU is logged.

Figures are NVIDIA's datasheet values without sparsity: where a datasheet prints a Tensor Core
figure "with sparsity" (marked *), the dense figure is half of it. `float32` is the CUDA-core
FP32 rate; `tfloat32` the TF32 Tensor Core rate, which is what float32 matmuls and convolutions
run at on Ampere and later under TensorFlow's default (tf.config.experimental.
enable_tensor_float_32_execution is on): use `dtype_for(precision, device_name)`.
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

T = 1e12  # figures below are TFLOP/s; products are rounded to whole FLOP/s
A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (2021; SXM and PCIe, 40/80 GB: same dense figures)"
H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (2023; Tensor Core figures * with sparsity, halved)"
V100_SHEET = "NVIDIA V100 Tensor Core GPU datasheet (2020)"
T4_SHEET = "NVIDIA T4 Tensor Core GPU datasheet (2019)"
L4_SHEET = "NVIDIA L4 Tensor Core GPU datasheet (2023; Tensor Core figures * with sparsity, halved)"

# (name pattern on the upper-cased device name, label, {dtype: FLOP/s}, source); most specific first.
TABLE = [
    (r"\bH100\b.*\bPCIE\b", "H100 PCIe",
     {"float32": 51 * T, "tfloat32": 756 / 2 * T, "bfloat16": 1513 / 2 * T,
      "float16": 1513 / 2 * T}, H100_SHEET),
    (r"\bH100\b.*\b(SXM|HBM3)", "H100 SXM",
     {"float32": 67 * T, "tfloat32": 989 / 2 * T, "bfloat16": 1979 / 2 * T,
      "float16": 1979 / 2 * T}, H100_SHEET),
    (r"\bA100\b", "A100",
     {"float32": 19.5 * T, "tfloat32": 156 * T, "bfloat16": 312 * T, "float16": 312 * T},
     A100_SHEET),
    (r"\bV100S\b", "V100S PCIe", {"float32": 16.4 * T, "float16": 130 * T}, V100_SHEET),
    (r"\bV100\b.*\bSXM2\b", "V100 SXM2", {"float32": 15.7 * T, "float16": 125 * T}, V100_SHEET),
    (r"\bV100\b.*\bPCIE\b", "V100 PCIe", {"float32": 14 * T, "float16": 112 * T}, V100_SHEET),
    (r"\bT4\b", "T4", {"float32": 8.1 * T, "float16": 65 * T}, T4_SHEET),
    (r"\bL4\b", "L4",
     {"float32": 30.3 * T, "tfloat32": 120 / 2 * T, "bfloat16": 242 / 2 * T,
      "float16": 242 / 2 * T}, L4_SHEET),
]
DTYPES = ("float32", "tfloat32", "bfloat16", "float16")


def gpu_peak(device_name: str, dtype: str) -> Optional[Tuple[float, str]]:
    """(dense peak FLOP/s, source) of one GPU, e.g. gpu_peak("NVIDIA A100-SXM4-80GB",
    "bfloat16") -> (312e12, "NVIDIA A100 ... datasheet ..."); None for an unknown device (or an
    ambiguous one, e.g. "Tesla V100" without its form factor) or a dtype it has no figure for."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype: received {dtype!r}; valid: {', '.join(DTYPES)}")
    name = (device_name or "").upper()
    for pattern, label, peaks, source in TABLE:
        if re.search(pattern, name):
            flops = peaks.get(dtype)
            return None if flops is None else (float(round(flops)), f"{label} {dtype}: {source}")
    return None


def dtype_for(precision: str, device_name: str) -> str:
    """The dtype whose peak bounds a job of distexp `precision` on this GPU: mixed_float16 ->
    float16, mixed_bfloat16 -> bfloat16, float32 -> tfloat32 where the GPU has TF32 (TensorFlow
    uses it for float32 matmuls by default), else float32."""
    if precision == "mixed_float16":
        return "float16"
    if precision == "mixed_bfloat16":
        return "bfloat16"
    return "tfloat32" if gpu_peak(device_name, "tfloat32") is not None else "float32"


def known() -> Dict[str, Dict[str, float]]:
    return {label: dict(peaks) for _, label, peaks, _ in TABLE}


def datasheet_peak(device_names, precision: str) -> Optional[Tuple[float, str]]:
    """The summed datasheet peak of the GPUs a job trains on, and its source; None when any of
    them is unknown (then no MFU: never a guess)."""
    total, sources = 0.0, []
    for name in device_names:
        found = gpu_peak(name, dtype_for(precision, name))
        if found is None:
            return None
        total += found[0]
        sources.append(found[1])
    if not device_names:
        return None
    dtype = dtype_for(precision, device_names[0])
    return total, f"datasheet: {len(device_names)} x {device_names[0]} {dtype} ({sources[0]})"
