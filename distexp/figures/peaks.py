"""Dense peak FLOP/s of known GPUs, per dtype, from the vendor's datasheets (no TensorFlow).

For `perf/mfu` on GPUs: MFU = model FLOPs x examples/s / peak. On CPU the peak is the processor's
theoretical one (distexp.figures.cpu_peak); a GPU's nominal peak comes from this table.
An unknown device, or a dtype the device has no figure for, gets None here: this table never
guesses (a wrong denominator makes MFU meaningless). The trainer then measures the GPU's peak
with a matmul probe and says so (distexp.figures.measured_peak).

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
HALVED = "Tensor Core figures * with sparsity, halved"
A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (2021; SXM and PCIe, 40/80 GB: same dense figures)"
H100_SHEET = f"NVIDIA H100 Tensor Core GPU datasheet (2023; {HALVED})"
H200_SHEET = f"NVIDIA H200 Tensor Core GPU datasheet (2024; {HALVED})"
GH200_SHEET = f"NVIDIA GH200 Grace Hopper Superchip datasheet (2024; its H100 GPU; {HALVED})"
BLACKWELL_SHEET = f"NVIDIA GB200 NVL72 / HGX B200 datasheet (2025; per GPU; {HALVED})"
V100_SHEET = "NVIDIA V100 Tensor Core GPU datasheet (2020)"
T4_SHEET = "NVIDIA T4 Tensor Core GPU datasheet (2019)"
L4_SHEET = f"NVIDIA L4 Tensor Core GPU datasheet (2023; {HALVED})"
# These datasheets print the dense figure beside the sparse one ("183 | 366*"): the dense one.
L40S_SHEET = "NVIDIA L40S datasheet (2023; dense figures as printed)"
L40_SHEET = "NVIDIA L40 datasheet (2022; dense figures as printed)"
A10_SHEET = "NVIDIA A10 Tensor Core GPU datasheet (2021; dense figures as printed)"
A30_SHEET = "NVIDIA A30 Tensor Core GPU datasheet (2021; dense figures as printed)"
A40_SHEET = "NVIDIA A40 datasheet (2021; dense figures as printed)"
# Workstation and GeForce boards: the architecture whitepapers' per-board tables (dense column;
# FP16/BF16 with FP32 accumulate, which TensorFlow's float16 matmuls and convolutions use).
ADA_PAPER = "NVIDIA Ada GPU architecture whitepaper (v2.1, appendix; dense, FP32 accumulate)"
GA102_PAPER = "NVIDIA Ampere GA102 GPU architecture whitepaper (v2.0; dense, FP32 accumulate)"


def _tc(fp32: float, tf32: float, half: float) -> Dict[str, float]:
    """A Tensor Core GPU's dense figures, TFLOP/s: FP32 (CUDA cores), TF32, BF16 = FP16."""
    return {"float32": fp32 * T, "tfloat32": tf32 * T, "bfloat16": half * T, "float16": half * T}


# (name pattern on the upper-cased device name, label, {dtype: FLOP/s}, source); the first match
# wins, most specific first. Names are what nvidia-smi and TensorFlow print ("NVIDIA H100 80GB
# HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"); a word boundary keeps A10 off A100
# and A10G, L40 off L40S, H200 off GH200, B200 off GB200.
TABLE = [
    (r"\bGB200\b", "GB200 (B200 GPU)", _tc(80, 2500 / 2, 5000 / 2), BLACKWELL_SHEET),
    (r"\bB200\b", "B200 (HGX)", _tc(75, 2200 / 2, 4500 / 2), BLACKWELL_SHEET),
    (r"\bGH200\b", "GH200 (H100 GPU)", _tc(67, 989 / 2, 1979 / 2), GH200_SHEET),
    (r"\bH200\b.*\bNVL\b", "H200 NVL", _tc(60, 835 / 2, 1671 / 2), H200_SHEET),
    (r"\bH200\b", "H200 SXM", _tc(67, 989 / 2, 1979 / 2), H200_SHEET),
    (r"\bH100\b.*\bNVL\b", "H100 NVL", _tc(60, 835 / 2, 1671 / 2), H100_SHEET),
    (r"\bH100\b.*\bPCIE\b", "H100 PCIe", _tc(51, 756 / 2, 1513 / 2), H100_SHEET),
    (r"\bH100\b.*\b(SXM|HBM3)", "H100 SXM", _tc(67, 989 / 2, 1979 / 2), H100_SHEET),
    (r"\bA100\b", "A100", _tc(19.5, 156, 312), A100_SHEET),
    (r"\bA10\b", "A10", _tc(31.2, 62.5, 125), A10_SHEET),
    (r"\bA30\b", "A30", _tc(10.3, 82, 165), A30_SHEET),
    (r"\bA40\b", "A40", _tc(37.4, 74.8, 149.7), A40_SHEET),
    (r"\bL40S\b", "L40S", _tc(91.6, 183, 362.05), L40S_SHEET),
    (r"\bL40\b", "L40", _tc(90.5, 90.5, 181.05), L40_SHEET),
    (r"\bL4\b", "L4", _tc(30.3, 120 / 2, 242 / 2), L4_SHEET),
    # "Quadro RTX 6000" (Turing) is another board: only the Ada one matches
    (r"\bRTX 6000\b.*\bADA\b", "RTX 6000 Ada", _tc(91.1, 182.1, 364.2), ADA_PAPER),
    (r"\bRTX A6000\b", "RTX A6000", _tc(38.7, 77.4, 154.8), GA102_PAPER),
    # the RTX 4090 D (China) has fewer SMs: not this row. FP16 with FP16 accumulate is 330.3.
    (r"\bRTX 4090\b(?! D\b)", "GeForce RTX 4090", _tc(82.6, 82.6, 165.2), ADA_PAPER),
    (r"\bV100S\b", "V100S PCIe", {"float32": 16.4 * T, "float16": 130 * T}, V100_SHEET),
    (r"\bV100\b.*\bSXM2\b", "V100 SXM2", {"float32": 15.7 * T, "float16": 125 * T}, V100_SHEET),
    (r"\bV100\b.*\bPCIE\b", "V100 PCIe", {"float32": 14 * T, "float16": 112 * T}, V100_SHEET),
    (r"\bT4\b", "T4", {"float32": 8.1 * T, "float16": 65 * T}, T4_SHEET),
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
