"""distexp.figures.peaks on the names nvidia-smi and TensorFlow print: each current NVIDIA
data-centre and workstation GPU finds its own datasheet row (A10 not A100, L40 not L40S, H200
not GH200, B200 not GB200), and a board the table lacks finds none (the trainer then measures)."""
from __future__ import annotations

import pytest

from distexp.figures import peaks

T = 1e12

# (device name as printed, the row's label, dtype, dense TFLOP/s on that row)
KNOWN = [
    ("NVIDIA H200", "H200 SXM", "bfloat16", 989.5),
    ("NVIDIA H200", "H200 SXM", "tfloat32", 494.5),
    ("NVIDIA H200 NVL", "H200 NVL", "float16", 835.5),
    ("NVIDIA B200", "B200 (HGX)", "bfloat16", 2250),
    ("NVIDIA B200", "B200 (HGX)", "tfloat32", 1100),
    ("NVIDIA GB200", "GB200 (B200 GPU)", "float16", 2500),
    ("NVIDIA GB200", "GB200 (B200 GPU)", "float32", 80),
    ("NVIDIA GH200 480GB", "GH200 (H100 GPU)", "bfloat16", 989.5),
    ("NVIDIA GH200 144G HBM3e", "GH200 (H100 GPU)", "float32", 67),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", "bfloat16", 989.5),
    ("NVIDIA H100 PCIe", "H100 PCIe", "float16", 756.5),
    ("NVIDIA H100 NVL", "H100 NVL", "bfloat16", 835.5),
    ("NVIDIA A100-SXM4-80GB", "A100", "bfloat16", 312),
    ("NVIDIA A100-SXM4-40GB", "A100", "tfloat32", 156),
    ("NVIDIA A100-PCIE-40GB", "A100", "float32", 19.5),
    ("NVIDIA A100 80GB PCIe", "A100", "float16", 312),
    ("NVIDIA A10", "A10", "float16", 125),
    ("NVIDIA A10", "A10", "tfloat32", 62.5),
    ("NVIDIA A30", "A30", "bfloat16", 165),
    ("NVIDIA A40", "A40", "float16", 149.7),
    ("NVIDIA L40S", "L40S", "float16", 362.05),
    ("NVIDIA L40S", "L40S", "tfloat32", 183),
    ("NVIDIA L40", "L40", "float16", 181.05),
    ("NVIDIA L40", "L40", "float32", 90.5),
    ("NVIDIA L4", "L4", "bfloat16", 121),
    ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", "float16", 364.2),
    ("NVIDIA RTX A6000", "RTX A6000", "bfloat16", 154.8),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "float16", 165.2),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "tfloat32", 82.6),
    ("Tesla V100-SXM2-16GB", "V100 SXM2", "float16", 125),
    ("Tesla T4", "T4", "float32", 8.1),
]


@pytest.mark.parametrize("name,label,dtype,tflops", KNOWN,
                         ids=[f"{n}-{d}" for n, _, d, _ in KNOWN])
def test_each_printed_name_finds_its_own_row(name, label, dtype, tflops):
    flops, source = peaks.gpu_peak(name, dtype)
    assert flops == pytest.approx(tflops * T)
    assert source.startswith(f"{label} {dtype}: NVIDIA ")


# Boards a pattern could catch by mistake: another chip (A10G, the 4090 D's fewer SMs, Turing's
# Quadro RTX 6000), or one not in the table yet. None: the trainer measures instead.
UNKNOWN = ["NVIDIA A10G", "NVIDIA GeForce RTX 4090 D", "Quadro RTX 6000",
           "NVIDIA RTX 5000 Ada Generation", "NVIDIA GeForce RTX 3090", "NVIDIA B300 SXM6 AC",
           "Tesla V100", "NVIDIA A2", ""]


@pytest.mark.parametrize("name", UNKNOWN)
def test_a_board_the_table_lacks_finds_no_row(name):
    assert all(peaks.gpu_peak(name, d) is None for d in peaks.DTYPES)


def test_every_tensor_core_row_has_all_four_dtypes_and_tf32_below_half():
    """A float32 job on Ampere or later is bounded by TF32 (dtype_for), a mixed one by FP16/BF16:
    every such row has both, and dense TF32 is at most the FP16 rate (a halved-twice or
    sparse figure would break it)."""
    for label, figures in peaks.known().items():
        if "tfloat32" not in figures:
            continue
        assert set(figures) == set(peaks.DTYPES), label
        assert figures["float32"] <= figures["tfloat32"] <= figures["float16"], label
        assert figures["bfloat16"] == figures["float16"], label
    assert peaks.dtype_for("float32", "NVIDIA H200") == "tfloat32"
    assert peaks.dtype_for("mixed_float16", "NVIDIA GeForce RTX 4090") == "float16"


def test_an_unknown_gpu_gets_a_measured_peak_once_per_name_and_dtype(tmp_path):
    """A GPU the table lacks: its peak is measured (one probe per name and dtype, on its first
    device), cached, tagged `measured: ...` and said on the console; the next job reads the
    cache; a known GPU is never probed."""
    from distexp.figures import measured_peak

    probes = []

    def measure(device, dtype):
        probes.append((device, dtype))
        return 100e12

    path = tmp_path / "cache" / "gpu_peaks.json"
    names, devices = ["NVIDIA Future GPU"] * 2, ["/gpu:0", "/gpu:1"]
    flops, tag, line = measured_peak.job_peak(names, devices, "mixed_float16", measure=measure,
                                              path=path)
    assert (flops, probes) == (200e12, [("/gpu:0", "float16")])
    assert tag.startswith("measured: 2 x NVIDIA Future GPU 100.0 TFLOP/s (a float16 matmul probe;")
    assert "measured now, cached in" in tag and "no datasheet peak for NVIDIA Future GPU" in line
    assert "measured peak" in line and "reads higher" in line
    again = measured_peak.job_peak(names[:1], devices[:1], "mixed_float16", measure=measure,
                                   path=path)
    assert again[0] == 100e12 and len(probes) == 1 and f"cached in {path}" in again[1]
    # another precision is another probe; float32 may run as TF32 and says so
    f32 = measured_peak.job_peak(names[:1], devices[:1], "float32", measure=measure, path=path)
    assert probes[-1] == ("/gpu:0", "float32") and "TF32 where the GPU has it" in f32[1]
    # a datasheet GPU: never probed, tagged datasheet, nothing extra on the console
    sheet = measured_peak.job_peak(["NVIDIA H200"], ["/gpu:0"], "float32", measure=measure,
                                   path=path)
    assert sheet[0] == pytest.approx(494.5 * T) and sheet[1].startswith("datasheet: ")
    assert sheet[2] is None and len(probes) == 2


def test_a_failed_or_pointless_probe_is_no_peak_with_its_reason(tmp_path):
    from distexp.figures import measured_peak

    def oom(device, dtype):
        raise RuntimeError("OOM when allocating tensor\nmore detail")

    flops, tag, why = measured_peak.job_peak(["NVIDIA X"], ["/gpu:0"], "float32", measure=oom,
                                             path=tmp_path / "p.json")
    assert (flops, tag) == (None, None)
    assert why == ("no datasheet peak for NVIDIA X and the matmul probe failed (RuntimeError: "
                   "OOM when allocating tensor)")
    none = measured_peak.job_peak(["NVIDIA X"], ["/gpu:0"], "float32", probe_allowed=False,
                                  measure=oom, path=tmp_path / "p.json")
    assert none == (None, None, "no datasheet peak for NVIDIA X (and no FLOPs count: no probe)")


def test_the_cache_lives_in_the_users_cache_dir(monkeypatch, tmp_path):
    from distexp.figures import measured_peak

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert measured_peak.cache_path() == tmp_path / "distexp" / "gpu_peaks.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert measured_peak.cache_path() == tmp_path / "home" / ".cache" / "distexp" / "gpu_peaks.json"
