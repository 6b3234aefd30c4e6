"""A CPU's theoretical peak float32 FLOP/s, from the processor's own description (no TensorFlow,
no benchmark): physical cores x float32 FLOPs per cycle per core x clock, for perf/mfu.

A peak measured by a benchmark moves with the machine's load (94.9-205.7 GFLOP/s between the
runs of one sweep here), so MFU over it ranks the machine's load, not the job. This peak is a
constant of the machine, stated with its source (the run's tag `distexp.peak_source`):

- cores: the physical cores among the CPUs this process may run on (os.sched_getaffinity):
  distinct (physical id, core id) pairs of /proc/cpuinfo (SMT siblings share their FMA units),
  or the CPUs themselves when cpuinfo does not say.
- FLOPs per cycle per core = float32 lanes of the FMA datapath x FMA pipes x 2 (a multiply-add is
  2 FLOPs), from the cpuinfo flags and, where the datapath is narrower than the instruction set,
  the AMD family: Zen 1 (family 0x17, models < 0x30) 128-bit, Zen 2-4 (0x17 from 0x30, 0x19)
  256-bit (Zen 4 runs AVX-512 as two 256-bit halves), Zen 5 (0x1a) 512-bit; Intel with AVX-512:
  512-bit; AVX2 + FMA: 256-bit; both with 2 FMA pipes (Haswell onwards, Zen: the most these cores
  have; Xeon Bronze/Silver and some Gold parts have one 512-bit FMA unit, so there the peak is an
  upper bound, as a peak should be). AVX without FMA: 8 lanes, a multiply and an add pipe; SSE: 4.
  Other architectures: no rule here, so no peak (None), never a guess.
- clock: sysfs `cpuinfo_max_freq` (the highest clock the kernel knows, boost included); else the
  rated clock in the model name ("@ 2.50GHz", Intel's base clock: turbo may exceed it); else
  cpuinfo's "cpu MHz" when there is no cpufreq driver (a VM: the fixed clock the hypervisor
  reports; a boost the guest cannot see may exceed it).
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Set, Tuple


def parse(cpuinfo: str) -> List[Dict[str, str]]:
    """/proc/cpuinfo as one dict per logical CPU."""
    out, cur = [], {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if cur:
                out.append(cur)
            cur = {}
            continue
        if ":" in line:
            k, v = line.split(":", 1)
            cur[k.strip()] = v.strip()
    if cur:
        out.append(cur)
    return [c for c in out if "processor" in c]


def flops_per_cycle(cpu: Dict[str, str]) -> Optional[Tuple[int, str]]:
    """(float32 FLOPs per cycle per core, why) for an x86 core; None for anything else."""
    flags = set(cpu.get("flags", "").split())
    vendor = cpu.get("vendor_id", "")
    if not flags or vendor not in ("GenuineIntel", "AuthenticAMD"):
        return None
    fma = "fma" in flags
    if fma:
        width, isa = (512, "AVX-512") if "avx512f" in flags else (256, "AVX2/FMA")
        why = f"{isa}"
        if vendor == "AuthenticAMD":
            family, model = int(cpu.get("cpu family", "0")), int(cpu.get("model", "0"))
            if family == 0x17 and model < 0x30:
                width, why = 128, f"{isa} on AMD Zen 1 (family 0x17): 128-bit FMA datapath"
            elif family in (0x17, 0x19):
                width, why = 256, f"{isa} on AMD Zen 2-4 (family {family:#x}): 256-bit FMA datapath"
            elif family == 0x1A:
                width, why = min(width, 512), f"{isa} on AMD Zen 5 (family 0x1a)"
        lanes = width // 32
        return lanes * 2 * 2, f"{why}: {lanes} float32 lanes x 2 FMA pipes x 2 FLOPs"
    if "avx" in flags:
        return 8 * 2, "AVX without FMA: 8 float32 lanes x (a multiply + an add pipe)"
    if "sse" in flags:
        return 4 * 2, "SSE: 4 float32 lanes x (a multiply + an add pipe)"
    return None


def physical_cores(cpus: List[Dict[str, str]]) -> int:
    ids = {(c.get("physical id"), c.get("core id")) for c in cpus}
    if any(a is None or b is None for a, b in ids):
        return len(cpus)
    return len(ids)


def clock_hz(cpu: Dict[str, str], max_khz: Optional[float]) -> Optional[Tuple[float, str]]:
    if max_khz:
        return max_khz * 1e3, "sysfs cpuinfo_max_freq"
    m = re.search(r"@\s*([0-9.]+)\s*GHz", cpu.get("model name", ""))
    if m:
        return float(m.group(1)) * 1e9, "the model name's rated clock (turbo may exceed it)"
    mhz = cpu.get("cpu MHz")
    if mhz:
        return float(mhz) * 1e6, ("/proc/cpuinfo cpu MHz (no cpufreq driver: the fixed clock "
                                  "reported to this machine)")
    return None


def cpu_peak(cpuinfo: str, allowed: Optional[Set[int]] = None,
             max_khz: Optional[float] = None) -> Optional[Tuple[float, str]]:
    """(peak float32 FLOP/s, source) of the CPUs in `allowed` (all when None), from cpuinfo text
    and the cpufreq maximum in kHz (None when the machine has no cpufreq); None when no rule
    applies (module docstring)."""
    cpus = [c for c in parse(cpuinfo)
            if allowed is None or int(c["processor"]) in allowed]
    if not cpus:
        return None
    per_cycle, clock = flops_per_cycle(cpus[0]), clock_hz(cpus[0], max_khz)
    if per_cycle is None or clock is None:
        return None
    cores = physical_cores(cpus)
    peak = cores * per_cycle[0] * clock[0]
    name = cpus[0].get("model name", "?")
    return peak, (f"theoretical: {cores} core(s) x {per_cycle[0]} float32 FLOP/cycle "
                  f"({per_cycle[1]}) x {clock[0] / 1e9:.3f} GHz ({clock[1]}) = "
                  f"{peak / 1e9:.1f} GFLOP/s, {name}")


def machine_cpu_peak() -> Optional[Tuple[float, str]]:
    """This machine's peak for the CPUs this process may use (cpu_peak on /proc/cpuinfo, sysfs)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return None
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    khz = []
    for cpu in sorted(allowed or []):
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq") as f:
                khz.append(float(f.read().strip()))
        except (OSError, ValueError):
            pass
    return cpu_peak(text, allowed, max(khz) if khz else None)
