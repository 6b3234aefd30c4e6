"""The report side of equal-work comparisons (weak and strong speed-up, their split into
batch effect x replica effect, the verdict), the controls `sweep.controls=true` plans, accuracy
and end-to-end notes, the step-time bottleneck, and MFU over a constant peak read from the
processor. Runs are written straight into a temporary MLflow store; no TensorFlow (the lean
end-to-end sweep: tests/report/test_equal_work_slow.py; the refusal beside another sweeper:
tests/sweeps/test_sweeper_refusals.py)."""
from __future__ import annotations

import csv

import pytest

from distexp.figures import cpu_peak, stats
from distexp.report import cli as report
from distexp.report import conclusions
from distexp.report.columns import CSV_FIELDS
from distexp.report.scaling import Significance
from helpers import launched as _launched
from helpers import report_store
from helpers import store_run as _run

# --- the controls the sweeper plans ------------------------------------------------------------

def test_controls_add_one_device_at_each_global_batch(tmp_path, capsys):
    got = _launched(tmp_path, "strategy=one_device,mirrored,central", "cpu_replicas=1,2",
                    "sweep.controls=true", "repeats=2")
    # 6 jobs (one_device x cpu_replicas=2 merged into cpu_replicas=1: one job) + 1 control
    # (mirrored x2 and central x2 share global batch 128), each twice, interleaved: the control
    # is job 5 of each round
    assert len(got) == 12
    control = ["strategy=one_device", "cpu_replicas=2", "sweep.controls=True", "repeats=2",
               "global_batch_size=128"]
    assert got[5] == [*control, "repeat=0", "seed=0"] and got[11] == [*control, "repeat=1",
                                                                    "seed=1"]
    assert "equal work for mirrored x2, central x2" in capsys.readouterr().out

    # per-replica 32: the controls run at 64; four replicas: at 128; the per-replica batch is
    # kept, so learning_rate_scaling (x global batch / batch_size_per_replica) gives the control
    # the job's learning rate
    got = _launched(tmp_path / "b", "strategy=mirrored", "cpu_replicas=2,4",
                    "batch_size_per_replica=32", "sweep.controls=true")
    assert got[2:] == [["strategy=one_device", "cpu_replicas=2", "batch_size_per_replica=32",
                        "sweep.controls=True", "global_batch_size=64"],
                       ["strategy=one_device", "cpu_replicas=4", "batch_size_per_replica=32",
                        "sweep.controls=True", "global_batch_size=128"]]

    # already in the sweep (the same work): nothing added; off: nothing added
    got = _launched(tmp_path / "c", "strategy=one_device,mirrored", "cpu_replicas=2",
                    "global_batch_size=128", "sweep.controls=true")
    assert len(got) == 2
    assert len(_launched(tmp_path / "d", "strategy=one_device,mirrored", "cpu_replicas=1,2")) == 3
    # on in the scaling preset (its 6 jobs: one_device once)
    got = _launched(tmp_path / "e", preset=("experiment=scaling",))
    assert len(got) == 6 and got[5][0] == "strategy=one_device" and \
        got[5][-1] == "global_batch_size=128"


# --- the report's numbers ----------------------------------------------------------------------

OD64 = [1000.0, 1100.0, 900.0]     # one_device, batch 64 (the weak baseline)
OD128 = [3000.0, 3300.0, 2700.0]   # one_device, batch 128 (the control)
MIR = [1800.0, 2000.0, 2200.0]     # mirrored x2, 64 per replica
CEN4 = [3500.0, 3600.0, 3700.0]    # central x4, 64 per replica: no control at 256


@pytest.fixture
def equal_work(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("distexp", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp, run_name="sweep-w", tags={
        "distexp.sweep_id": "w", "distexp.run_kind": "sweep"}).info.run_id
    num = iter(range(100))
    peak = cpu_peak.cpu_peak(ZEN4)

    def job(strategy, replicas, gb, rates, overrides, steps, extra=None, e2e=None, epochs=()):
        for i, rate in enumerate(rates):
            n = next(num)
            tags = {"distexp.sweep_id": "w", "distexp.run_kind": "job",
                    "mlflow.parentRunId": parent, "distexp.job_num": str(n),
                    "distexp.overrides": f"{overrides} repeats=3 repeat={i}",
                    "distexp.peak_source": peak[1]}
            params = {"strategy.name": strategy, "model.name": "cnn", "dataset.name": "digits",
                      "loop.name": "custom", "num_replicas": replicas, "num_workers": 1,
                      "global_batch_size": gb, "epochs": 5, "steps_per_epoch_resolved": steps,
                      "warmup_steps": 5}
            metrics = {"perf/examples_per_sec": rate, "perf/examples_per_sec_ci95": 0.01 * rate,
                       "eval/accuracy": 0.94 if gb == 64 else 0.91,
                       "perf/time_to_first_step_s": 7.0, "perf/peak_flops": peak[0],
                       "perf/flops_per_example": 1e6, "perf/mfu": 1e6 * rate / peak[0],
                       **(extra or {})}
            if e2e is not None:
                metrics["perf/examples_per_sec_end_to_end"] = e2e
            rid = _run(client, exp, f"{strategy}-r{replicas}-{gb}", "FINISHED", params, metrics,
                       tags)
            for epoch, seconds in enumerate(epochs, start=1):
                client.log_metric(rid, "perf/epoch_time_s", seconds, step=epoch)

    job("one_device", 1, 64, OD64, "strategy=one_device cpu_replicas=2", 22)
    job("one_device", 1, 128, OD128,
        "strategy=one_device cpu_replicas=2 global_batch_size=128", 11, e2e=1000.0,
        epochs=[0.608] * 5)
    job("mirrored", 2, 128, MIR, "strategy=mirrored cpu_replicas=2", 11, e2e=1990.0,
        extra={"perf/step_input_ms": 1.0, "perf/step_compute_ms": 2.9,
               "perf/step_sync_ms": 6.1, "perf/step_other_ms": 0.0})
    job("central", 4, 256, CEN4, "strategy=central cpu_replicas=4", 6)
    job("one_device", 1, 64, [950.0], "strategy=one_device cpu_replicas=4", 22)
    client.set_terminated(parent, "FINISHED")
    return uri, tmp_path


def test_weak_strong_and_their_split(equal_work):
    uri, tmp_path = equal_work
    rows, out, md = report.build(uri, sweep_id="w", out=tmp_path / "rep", log=False)
    by = {(r.strategy, r.replicas, r.global_batch, len(r.rates)): r for r in rows}
    mir = by[("mirrored", 2, 128, 3)]
    # weak: over one_device at 64 per replica; strong: over the control at global batch 128
    assert mir.weak.value == pytest.approx(2000 / 1000)
    low, high, _ = stats.ratio_interval(MIR, OD64)
    assert (mir.weak.low, mir.weak.high) == (pytest.approx(low), pytest.approx(high))
    assert mir.weak.significant and low > 1
    assert mir.strong.value == pytest.approx(2000 / 3000)
    low, high, _ = stats.ratio_interval(MIR, OD128)
    assert (mir.strong.low, mir.strong.high) == (pytest.approx(low), pytest.approx(high))
    assert high < 1 and mir.strong.significant and mir.strong.significance == "significant"
    assert mir.strong.baseline == "one_device r1 (strong, same cpu_replicas=2)"
    # the split: batch effect x replica effect = weak speed-up
    assert mir.batch_effect == pytest.approx(3000 / 1000)
    assert mir.replica_effect == pytest.approx(2000 / 3000)
    assert mir.batch_effect * mir.replica_effect == pytest.approx(mir.weak.value)
    # the v2 columns keep their meaning: the weak speed-up
    assert mir.speedup == mir.weak.value and mir.speedup_low == mir.weak.low
    # no control at 256: strong not measured, and nothing is implied
    cen = by[("central", 4, 256, 3)]
    assert cen.strong is None and cen.replica_effect is None and cen.batch_effect is None
    # its weak baseline: one_device set up the same way (cpu_replicas=4), which ran once
    assert cen.weak.value == pytest.approx(3600 / 950)
    assert cen.weak.baseline == "one_device r1 (weak, same cpu_replicas=4)"
    assert cen.weak.significance == Significance.WITHIN_RUN and not cen.weak.significant

    lines = conclusions.verdict_lines(rows)
    assert md.index("## Verdict") < md.index("| strategy")  # the report opens with it
    s = stats.ratio_interval(MIR, OD128)
    assert lines[0] == (f"At equal global batch 128: one_device x1 fastest; mirrored x2 0.67x of "
                        f"one_device x1 [{s[0]:.2f}, {s[1]:.2f}], significant.")
    assert lines[1] == ("mirrored x2: weak speed-up x2.00 (over one_device x1 at batch 64) = "
                        "batch effect x3.00 (one_device x1 at batch 128 vs 64) x replica effect "
                        "x0.67: the gain is the bigger batch, not the replicas.")
    assert lines[2].startswith("Replica effect not measured at global batch 256: no 1-replica "
                               "job at that batch (sweep.controls=true adds one). The weak "
                               "speed-ups (central x4 x")

    with open(out / "report.csv") as f:
        got = {(r["strategy"], r["replicas"], r["global_batch"], r["runs"]): r
               for r in csv.DictReader(f)}
    row = got[("mirrored", "2", "128", "3")]
    assert float(row["speedup_weak"]) == pytest.approx(2.0)
    assert float(row["speedup_strong"]) == pytest.approx(2 / 3)
    assert float(row["speedup_strong_high"]) == pytest.approx(s[1])
    assert row["speedup_strong_significant"] == "True" and row["speedup_weak_significant"] == "True"
    assert float(row["batch_effect"]) == pytest.approx(3.0)
    assert float(row["replica_effect"]) == pytest.approx(2 / 3)
    assert float(row["speedup"]) == pytest.approx(2.0)  # speedup: the weak one where there is a weak baseline
    assert row["bottleneck"] == "sync 61 %" and float(row["step_sync_ms"]) == 6.1
    assert row["optimizer_steps"] == "55"
    cen = got[("central", "4", "256", "3")]
    assert cen["speedup_strong"] == "" and cen["replica_effect"] == ""
    # the header and every row come from one definition
    assert list(got[("central", "4", "256", "3")]) == CSV_FIELDS
    base = got[("one_device", "1", "128", "3")]
    assert base["speedup_strong"] == "1.0" and base["speedup_strong_low"] == ""


def test_accuracy_end_to_end_and_bottleneck_notes(equal_work):
    uri, tmp_path = equal_work
    rows, _, md = report.build(uri, sweep_id="w", out=tmp_path / "rep", log=False)
    acc = conclusions.accuracy_notes(rows)
    assert len(acc) == 1 and "compare different training" in acc[0]
    assert ("compare different training: 110 steps at global batch 64; 55 steps at global batch "
            "128; 30 steps at global batch 256.") in acc[0]
    # the control's end-to-end 1000 examples/s against its steady 3000 [t-interval of 3 runs]:
    # flagged, the cause named; mirrored's 1990 lies inside its interval: not flagged
    e2e = conclusions.end_to_end_notes(rows)
    assert len(e2e) == 1 and e2e[0].startswith("one_device x1 (job 3): end to end 1,000 "
                                               "examples/s is 0.33x its steady state 3,000")
    # its wall time 55 x 128 / 1000 = 7.04 s: 2.35 s of steps at the steady rate, 3.04 s of
    # epochs' training (0.69 s beyond steady speed: warm-up), 4.00 s between epochs' training
    wall, steady, training = 55 * 128 / 1000, 55 * 128 / 3000, 5 * 0.608
    assert e2e[0].endswith(f"likely cause: evaluation between epochs ({wall - training:.2f} s); "
                           f"input fill or tracing in the warm-up steps "
                           f"({training - steady:.2f} s beyond steady speed).")
    assert e2e[0] in md and acc[0] in md
    assert "| sync 61 % |" in md


def test_end_to_end_cause_without_epoch_times_and_with_an_input_bottleneck():
    """The issue's case: a 1-epoch job whose input cost lands in its warm-up steps (24,474
    examples/s steady, ~280 end to end), with and without the step split."""
    from distexp.report.diagnosis import bottleneck, end_to_end_gap
    from distexp.report.scaling import Row

    r = Row(run_id="a", run_name="a", status="FINISHED", strategy="one_device", model="cnn",
            dataset="digits", loop="custom", workers=1, replicas=1, global_batch=64,
            rate=24474.0, ci95=500.0, eval_accuracy=None, time_to_first_step=None,
            rates=[24474.0], epochs=1, steps_per_epoch=25, warmup_steps=5,
            checkpoint_every="0", rate_end_to_end=280.0)
    ratio, cause = end_to_end_gap(r)
    assert ratio == pytest.approx(280 / 24474)
    gap = 25 * 64 / 280 - 25 * 64 / 24474
    assert cause == (f"input fill or tracing in the 5 warm-up steps (excluded from the steady "
                     f"state; ~{gap:.2f} s beyond steady speed)")
    r.breakdown = {"input": 30.0, "compute": 10.0, "sync": 0.0, "other": 2.0}
    assert bottleneck(r) == ("input", pytest.approx(30 / 42))
    assert end_to_end_gap(r)[1].startswith("input (71 % of the step time); input fill")
    r.rate_end_to_end = 24000.0  # within 10 %: not flagged
    assert end_to_end_gap(r) is None


def test_mfu_over_a_constant_peak(equal_work):
    """Two runs of one job at different speeds: the peak is the same, so MFU moves exactly as
    the throughput does; runs that divided by a measured benchmark (no source tag) show none."""
    uri, tmp_path = equal_work
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("distexp").experiment_id
    runs = client.search_runs([exp], "tags.`distexp.overrides` LIKE 'strategy=mirrored%'")
    peaks = {r.data.metrics["perf/peak_flops"] for r in runs}
    assert peaks == {cpu_peak.cpu_peak(ZEN4)[0]}
    a, b = sorted(runs, key=lambda r: r.data.metrics["perf/examples_per_sec"])[:2]
    assert a.data.metrics["perf/mfu"] / b.data.metrics["perf/mfu"] == pytest.approx(
        a.data.metrics["perf/examples_per_sec"] / b.data.metrics["perf/examples_per_sec"])
    rows, _, md = report.build(uri, sweep_id="w", out=tmp_path / "rep", log=False)
    assert "theoretical: 2 core(s) x 32 float32 FLOP/cycle" in md
    r = _run(client, exp, "old", "FINISHED", {"strategy.name": "one_device", "model.name": "cnn",
                                              "dataset.name": "digits", "loop.name": "custom",
                                              "num_replicas": 1, "global_batch_size": 64},
             {"perf/examples_per_sec": 500.0, "perf/mfu": 0.4}, {})
    rows, _, md = report.build(uri, filter_string=f"attributes.run_id = '{r}'",
                               out=tmp_path / "old", log=False)
    assert rows[0].mfu == 0.4 and report.shown_mfu(rows[0]) is None
    assert "MFU not shown for runs whose peak was a matmul benchmark" in md


def test_split_is_not_claimed_when_the_replica_effect_is_not_significant():
    from distexp.report.scaling import Row, add_scaling

    def row(strategy, replicas, gb, rates, overrides):
        return Row(run_id=strategy, run_name=strategy, status="FINISHED", strategy=strategy,
                   model="cnn", dataset="digits", loop="custom", workers=1, replicas=replicas,
                   global_batch=gb, rate=stats.median(rates), ci95=None, eval_accuracy=None,
                   time_to_first_step=None, rates=rates, overrides=overrides)

    rows = [row("one_device", 1, 64, [900.0, 1000.0, 1100.0], "strategy=one_device"),
            row("one_device", 1, 128, [1500.0, 2500.0, 3500.0],
                "strategy=one_device global_batch_size=128"),
            row("mirrored", 2, 128, [1800.0, 2000.0, 2200.0], "strategy=mirrored")]
    add_scaling(rows)
    mir = rows[2]
    assert mir.strong.significance == "~" and mir.strong.value == pytest.approx(0.8)
    assert mir.batch_effect == pytest.approx(2.5) and mir.weak.value == pytest.approx(2.0)
    lines = conclusions.verdict_lines(rows)
    assert lines[0].startswith("At equal global batch 128: no set-up significantly faster than "
                               "one_device x1; mirrored x2 ~ 0.80x of one_device x1 [")
    assert lines[1].endswith("x replica effect x0.80: the replica effect is not significant (~: "
                             "see above), so the split is not established.")


def test_fastest_only_when_the_leader_beats_the_runner_up():
    """Two set-ups both significantly faster than one replica: the larger point estimate is not
    called fastest unless it beats the other by their own between-run interval."""
    from distexp.report.scaling import Row, add_scaling

    def row(strategy, replicas, rates, overrides):
        return Row(run_id=strategy, run_name=strategy, status="FINISHED", strategy=strategy,
                   model="cnn", dataset="digits", loop="custom", workers=1, replicas=replicas,
                   global_batch=128, rate=stats.median(rates), ci95=None, eval_accuracy=None,
                   time_to_first_step=None, rates=rates, overrides=overrides)

    def lines_for(central_rates):
        rows = [row("one_device", 1, [1000.0, 1010.0, 990.0],
                    "strategy=one_device global_batch_size=128"),
                row("mirrored", 2, [1300.0, 1320.0, 1280.0], "strategy=mirrored"),
                row("central", 2, central_rates, "strategy=central")]
        add_scaling(rows)
        assert all(r.strong.significant and r.strong.value > 1 for r in rows[1:])
        return conclusions.verdict_lines(rows)

    tie = lines_for([1260.0, 1290.0, 1275.0])  # 1.28x vs 1.30x: no difference established
    assert tie[0].startswith("At equal global batch 128: mirrored x2 and central x2 significantly "
                             "faster than one_device x1; no difference between them established")
    clear = lines_for([1100.0, 1110.0, 1090.0])  # 1.10x vs 1.30x, tight: mirrored wins
    assert clear[0].startswith("At equal global batch 128: mirrored x2 fastest;")


def test_without_controls_the_replica_effect_is_not_measured(tmp_path):
    client, uri, pid, sweep_dir = report_store(tmp_path)
    rows, _, md = report.build(uri, log=False)
    mir = [r for r in rows if r.run_name == "mirrored-r2"][0]
    assert mir.strong is None and mir.replica_effect is None
    assert "not measured (no 1-replica job at this global batch)" in md
    lines = conclusions.verdict_lines(rows)
    assert any(line.startswith("[cnn/synthetic/custom] Replica effect not measured at global "
                               "batch 128") for line in lines), lines
    assert not any("fastest" in line for line in lines)
    assert lines[-1].startswith("One run per job: every interval above is within-run only")


# --- the CPU's peak, from its own description ----------------------------------------------------

def _cpu(n, vendor, family, model, name, flags, mhz, core):
    return (f"processor\t: {n}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
            f"model name\t: {name}\ncpu MHz\t\t: {mhz}\nphysical id\t: 0\ncore id\t\t: {core}\n"
            f"flags\t\t: {flags}\n\n")


AVX512 = "fpu sse sse2 avx fma avx2 avx512f avx512dq"
ZEN4 = "".join(_cpu(i, "AuthenticAMD", 25, 17, "AMD EPYC", AVX512, "2596.142", i) for i in (0, 1))


def test_cpu_peak_from_cpuinfo_text():
    peak, source = cpu_peak.cpu_peak(ZEN4)
    assert peak == pytest.approx(2 * (8 * 2 * 2) * 2596.142e6)  # Zen 4: 256-bit FMA datapath
    assert source.startswith("theoretical: 2 core(s) x 32 float32 FLOP/cycle")
    assert "/proc/cpuinfo cpu MHz" in source
    assert cpu_peak.cpu_peak(ZEN4, allowed={1})[0] == pytest.approx(32 * 2596.142e6)
    # Intel with AVX-512, 2 cores with 2 hyperthreads each: 2 physical cores, the rated clock
    xeon = "".join(_cpu(i, "GenuineIntel", 6, 85, "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz",
                        AVX512, "1000.0", i // 2) for i in range(4))
    assert cpu_peak.cpu_peak(xeon)[0] == pytest.approx(2 * 64 * 2.4e9)
    assert cpu_peak.cpu_peak(xeon, max_khz=3_700_000)[0] == pytest.approx(2 * 64 * 3.7e9)
    haswell = _cpu(0, "GenuineIntel", 6, 63, "Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz",
                   "fpu sse sse2 avx fma avx2", "1200", 0)
    assert cpu_peak.cpu_peak(haswell)[0] == pytest.approx(32 * 2.5e9)
    zen1 = _cpu(0, "AuthenticAMD", 23, 1, "AMD EPYC 7601 32-Core Processor", "sse avx fma avx2",
                "2200.000", 0)
    assert cpu_peak.cpu_peak(zen1)[0] == pytest.approx(16 * 2.2e9)
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n\n"
    assert cpu_peak.cpu_peak(arm) is None  # no rule: no peak, never a guess


def test_this_machines_peak_is_a_constant(monkeypatch):
    """A machine (2 Zen 4 cores, this process on both, sysfs max 3.7 GHz) whose current clock
    moves between two reads of /proc/cpuinfo (2596 -> 1400 MHz under load): the peak stays."""
    import io

    files = {"/proc/cpuinfo": ZEN4, **{f"/sys/devices/system/cpu/cpu{i}/cpufreq/cpuinfo_max_freq":
                                         "3700000\n" for i in (0, 1)}}

    def fake_open(path, *a, **kw):
        if path not in files:
            raise FileNotFoundError(path)
        return io.StringIO(files[path])

    monkeypatch.setattr(cpu_peak, "open", fake_open, raising=False)
    monkeypatch.setattr(cpu_peak.os, "sched_getaffinity", lambda pid: {0, 1})
    first = cpu_peak.machine_cpu_peak()
    files["/proc/cpuinfo"] = ZEN4.replace("2596.142", "1400.000")
    again = cpu_peak.machine_cpu_peak()
    assert first == again
    assert first[0] == pytest.approx(2 * 32 * 3.7e9) and first[1].startswith("theoretical: ")
    monkeypatch.setattr(cpu_peak.os, "sched_getaffinity", lambda pid: {1})  # pinned to one core
    assert cpu_peak.machine_cpu_peak()[0] == pytest.approx(32 * 3.7e9)
