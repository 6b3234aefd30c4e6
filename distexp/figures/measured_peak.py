"""The peak FLOP/s of a job's GPUs: the datasheet's (distexp.figures.peaks), else measured.

A GPU the datasheet table lacks gets a peak measured by a short matmul probe at the job's
precision (float16 for mixed_float16, bfloat16 for mixed_bfloat16, float32 otherwise, which runs
as TF32 where the GPU has it and TensorFlow allows it, its default), on one GPU of that name for
PROBE_S seconds. It is measured once per device name and dtype and kept in CACHE_FILE under the
user's cache directory (`$XDG_CACHE_HOME`, else `~/.cache`): later jobs read it. Delete the file
to measure again (after a driver upgrade, or if the GPU was busy the first time).

A measured peak is what the GPU achieved on a large matmul, below its nominal figure: an MFU over
it reads higher than one over a datasheet peak would. It is therefore never silent: the run's tag
`distexp.peak_source` starts with `measured:` (a datasheet peak's with `datasheet:`) and the
console says so in one line (`line`). No TensorFlow here except in the probe.
"""
from __future__ import annotations

import datetime
import fcntl
import json
import os
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from distexp.figures import peaks, perf_keys

CACHE_FILE = "gpu_peaks.json"
PROBE_N = 8192     # square matmul side: large enough to fill a data-centre GPU's Tensor Cores
PROBE_S = 1.0      # seconds of timed rounds per GPU name (after one untimed warm-up)

# measure(device, dtype) -> FLOP/s of one device
Measure = Callable[[str, str], float]


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "distexp" / CACHE_FILE


def probe_dtype(precision: str) -> str:
    """The dtype of the probe's matmul for a job of distexp `precision`."""
    return {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}.get(precision, "float32")


def probe(device: str, dtype: str) -> float:
    """One device's `dtype` matmul FLOP/s (distexp.figures.flops.peak_flops, PROBE_N, PROBE_S)."""
    from distexp.figures.flops import peak_flops

    return peak_flops([device], n=PROBE_N, seconds=PROBE_S, dtype=dtype)


def _read(path: Path) -> Dict[str, dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _store(path: Path, key: str, entry: dict) -> bool:
    """Add `key` to the cache file (several jobs may write at once: a lock, then an atomic
    replace); False where it cannot be written (the next job measures again)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = _read(path)
            data[key] = entry
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            tmp.replace(path)
        return True
    except OSError:
        return False


def measured(names: Sequence[str], devices: Sequence[str], precision: str, *,
             measure: Measure = probe, path: Optional[Path] = None) -> Tuple[float, str, str]:
    """(summed FLOP/s, tag value, console line) of the GPUs `devices` whose device names are
    `names` (same order): one probe per name not in the cache, on its first device."""
    path = path or cache_path()
    dtype = probe_dtype(precision)
    cached, per_name, fresh, saved = _read(path), {}, [], True
    for name, device in zip(names, devices):
        if name in per_name:
            continue
        key = f"{name}|{dtype}"
        if key in cached and cached[key].get("flops"):
            per_name[name] = float(cached[key]["flops"])
            continue
        per_name[name] = float(measure(device, dtype))
        fresh.append(name)
        entry = {"flops": per_name[name], "dtype": dtype, "device": device,
                 "measured": datetime.datetime.now().isoformat(timespec="seconds"),
                 "probe": f"{PROBE_N}x{PROBE_N} {dtype} matmul, best of {PROBE_S:g} s"}
        saved = _store(path, key, entry) and saved
    total = sum(per_name[n] for n in names)
    what = ", ".join(f"{names.count(n)} x {n} {per_name[n] / 1e12:.1f} TFLOP/s"
                     for n in dict.fromkeys(names))
    how = (f"a {dtype} matmul probe (TF32 where the GPU has it)" if dtype == "float32"
           else f"a {dtype} matmul probe")
    where = (f"measured now, cached in {path}" if fresh and saved else
             f"measured now (cache {path} not writable)" if fresh else f"cached in {path}")
    tag = f"measured: {what} ({how}; {where}; not in distexp.figures.peaks' datasheet table)"
    line = (f"{perf_keys.MFU}: no datasheet peak for {', '.join(dict.fromkeys(names))}: MFU is over a "
            f"measured peak, {what} ({how}, {where}); a measured peak is below the nominal one, "
            "so this MFU reads higher than a datasheet's would")
    return total, tag, line


def job_peak(names: List[str], devices: List[str], precision: str, *, probe_allowed: bool = True,
             measure: Measure = probe, path: Optional[Path] = None
             ) -> Tuple[Optional[float], Optional[str], Optional[str]]:
    """(FLOP/s, tag value, console line) for a job on these GPUs: the datasheet's summed peak
    (line None) when every name is in the table, else a measured one (the line says so). No peak
    (None, None, why) where the probe fails or is not allowed (`probe_allowed`: false where there
    is no FLOPs count, so no MFU to divide)."""
    sheet = peaks.datasheet_peak(names, precision)
    if sheet is not None:
        return sheet[0], sheet[1], None
    unknown = f"no datasheet peak for {', '.join(sorted(set(names)))}"
    if not probe_allowed:
        return None, None, f"{unknown} (and no FLOPs count: no probe)"
    try:
        return measured(names, devices, precision, measure=measure, path=path)
    except Exception as ex:  # noqa: BLE001  (out of memory, a dtype the GPU lacks: say it, go on)
        first = str(ex).splitlines()[0] if str(ex) else ""
        return None, None, f"{unknown} and the matmul probe failed ({type(ex).__name__}: {first})"
