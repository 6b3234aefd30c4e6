"""repeats=N and significance, with no TensorFlow and no timing assertions: the sweeper's job
order (the real sweeper class, a recording launcher), the statistics against hand computations
and table quantiles, and the report's interval and verdict computed from repeats written
straight into a temporary MLflow store."""
from __future__ import annotations

import csv
import math

import pytest

from distexp.figures import meaning, peaks, stats
from distexp.report import cli as report
from distexp.report.scaling import Significance
from helpers import job_params as _job
from helpers import new_store, report_store
from helpers import perf_metrics as _perf
from helpers import store_run as _run
from helpers import sweeper as _sweeper


def test_repeats_run_interleaved_round_robin(tmp_path):
    from hydra.core.global_hydra import GlobalHydra

    try:
        sweeper = _sweeper(tmp_path, "repeats=2")
        sweeper.sweep(["strategy=one_device,mirrored", "repeats=2"])
        preset = _sweeper(tmp_path / "preset", "+hydra.sweeper.params.repeats=2",  # as a preset
                          "+hydra.sweeper.params.strategy='one_device,mirrored'")
        preset.sweep([])
        assert [o[-2:] for _, o in preset.launcher.launched] == [["repeat=0", "seed=0"]] * 2 + [
            ["repeat=1", "seed=1"]] * 2
        got = [(num, [o for o in ovr if o.startswith(("strategy=", "repeat=", "seed="))])
               for num, ovr in sweeper.launcher.launched]
        one = _sweeper(tmp_path / "one", "repeats=2")  # sweep.seed_by_round=false: one seed
        one.sweep(["strategy=one_device,mirrored", "repeats=2", "seed=7",
                   "sweep.seed_by_round=false"])
        ones = [[o for o in ovr if o.startswith("seed=")] for _, ovr in one.launcher.launched]
    finally:
        GlobalHydra.instance().clear()
    # sweep.seed_by_round (default): round r runs every set-up with the same seed, 0 + r
    assert got == [(0, ["strategy=one_device", "repeat=0", "seed=0"]),
                   (1, ["strategy=mirrored", "repeat=0", "seed=0"]),
                   (2, ["strategy=one_device", "repeat=1", "seed=1"]),
                   (3, ["strategy=mirrored", "repeat=1", "seed=1"])]
    assert ones == [["seed=7"]] * 4


def test_one_repeat_is_the_basic_sweep(tmp_path):
    from hydra.core.global_hydra import GlobalHydra

    try:
        sweeper = _sweeper(tmp_path)
        sweeper.sweep(["strategy=central,mirrored", "cpu_replicas=1,2"])
        got = [ovr for _, ovr in sweeper.launcher.launched]
    finally:
        GlobalHydra.instance().clear()
    assert got == [["strategy=central", "cpu_replicas=1"], ["strategy=central", "cpu_replicas=2"],
                   ["strategy=mirrored", "cpu_replicas=1"], ["strategy=mirrored", "cpu_replicas=2"]]


def test_batches_keep_job_numbers():
    from distexp.sweeps.planning import batches

    launch = [(1, ["a"]), (2, ["b"]), (5, ["c"]), (6, ["d"]), (7, ["e"])]
    assert batches(launch, None) == [(1, [["a"], ["b"]]), (5, [["c"], ["d"], ["e"]])]
    assert batches(launch, 2) == [(1, [["a"], ["b"]]), (5, [["c"], ["d"]]), (7, [["e"]])]


def test_t_quantiles_match_the_tables():
    for p, df, table in [(0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 4, 2.7764),
                         (0.975, 10, 2.2281), (0.8, 4, 0.9410), (0.975, 30, 2.0423)]:
        assert stats.t_quantile(p, df) == pytest.approx(table, abs=1e-4)


# Student's t quantiles (p, df, t) as computed by distexp's own incomplete-beta code (Numerical
# Recipes' continued fraction, bisection on the CDF) before SciPy replaced it: the figures must not move.
QUANTILES = [
    (0.6, 1, 0.32491969623290673), (0.8, 1, 1.376381920471172), (0.9, 1, 3.0776835371752504),
    (0.975, 1, 12.706204736174659), (0.995, 1, 63.65674116287079), (0.6, 2, 0.28867513459481275),
    (0.8, 2, 1.0606601717798223), (0.9, 2, 1.8856180831641258), (0.975, 2, 4.302652729749456),
    (0.995, 2, 9.924843200918229), (0.6, 3, 0.27667066233268955), (0.8, 3, 0.9784723123633046),
    (0.9, 3, 1.6377443536962093), (0.975, 3, 3.1824463052837046), (0.995, 3, 5.840909309733332),
    (0.6, 4.5, 0.26875183554217597), (0.8, 4.5, 0.9289655685760094), (0.9, 4.5, 1.500885317508558),
    (0.975, 4.5, 2.658912347204401), (0.995, 4.5, 4.272823993011279), (0.6, 7, 0.2631668613520217),
    (0.8, 7, 0.8960296443137641), (0.9, 7, 1.4149239276505075), (0.975, 7, 2.364624251592784),
    (0.995, 7, 3.4994832973504852), (0.6, 12.3, 0.2588925598668992), (0.8, 12.3, 0.87182865492565),
    (0.9, 12.3, 1.3542946376388438), (0.975, 12.3, 2.172933481758962), (0.995, 12.3, 3.0410295709435182),
    (0.6, 30, 0.25560536495191444), (0.8, 30, 0.8537672614713039), (0.9, 30, 1.3104150253914115),
    (0.975, 30, 2.042272456301233), (0.995, 30, 2.7499956535672174), (0.6, 120, 0.2539095232149191),
    (0.8, 120, 0.8446268377431323), (0.9, 120, 1.2886462336563786), (0.975, 120, 1.979930405082441),
    (0.995, 120, 2.617421145106862), (0.6, 1000, 0.2534145158393952), (0.8, 1000, 0.8419808221623974),
    (0.9, 1000, 1.2823987214607167), (0.975, 1000, 1.9623390808264358), (0.995, 1000, 2.580754698065954),
]


def test_t_quantiles_are_the_same_numbers_as_the_incomplete_beta_code():
    for p, df, t in QUANTILES:
        assert stats.t_quantile(p, df) == pytest.approx(t, rel=1e-10, abs=1e-12), (p, df)
        assert stats.t_quantile(1 - p, df) == pytest.approx(-t, rel=1e-10, abs=1e-12), (p, df)


def test_intervals_and_repeats_are_the_same_numbers_as_the_incomplete_beta_code():
    x, y = [101.0, 97.5, 103.2], [80.1, 82.4, 79.9, 81.0]
    assert stats.ratio_interval(x, y) == pytest.approx(
        (1.1704193687565227, 1.321396629565193, 2.7237885780965825), rel=1e-10)
    assert stats.ratio_interval([10.0, 10.1], [9.0, 9.5, 9.9]) == pytest.approx(
        (0.9479698179273905, 1.190673416141992, 2.127624048833708), rel=1e-10)
    assert stats.repeats_needed(x, y) == 2
    assert stats.repeats_needed([100.0, 130.0], [99.0, 120.0]) == 206
    assert stats.repeats_needed([100.0, 102.0, 98.0], [99.0, 101.0, 100.5]) is None


def test_first_non_finite_finds_nan_and_both_infinities():
    assert stats.first_non_finite([0.5, 0.4, 0.3]) is None and stats.first_non_finite([]) is None
    assert stats.first_non_finite([0.5, float("nan"), float("inf")]) == 1
    assert stats.first_non_finite([0.5, 0.4, float("-inf")]) == 2
    assert stats.first_non_finite([float("inf")]) == 0


def test_ratio_interval_by_hand():
    # x = 2 y run by run: equal spread of the logs, so Welch's df = 2 (n - 1) = 4 exactly
    y = [900.0, 1000.0, 1100.0]
    x = [2 * v for v in y]
    logs = [math.log(v) for v in y]
    m = sum(logs) / 3
    s2 = sum((v - m) ** 2 for v in logs) / 2
    se = math.sqrt(2 * s2 / 3)
    low, high, df = stats.ratio_interval(x, y)
    assert df == pytest.approx(4.0)
    assert low == pytest.approx(2 * math.exp(-2.776445 * se), rel=1e-6)
    assert high == pytest.approx(2 * math.exp(2.776445 * se), rel=1e-6)
    assert stats.ratio_interval([1.0], y) is None  # one run: no between-run interval


def test_repeats_needed_by_hand():
    # d = ln 1.1, s^2 = (ln 1.05)^2 / 2 on each side: n >= 2 s^2 (t975 + t80)^2 / d^2 at df 2n-2
    x, y = [1100 * 1.05, 1100 / 1.05], [1000 * 1.05, 1000 / 1.05]
    s2 = math.log(1.05) ** 2 * 2  # sample variance of {+ln1.05, -ln1.05}
    d2 = math.log(1.1) ** 2

    def enough(n):
        return n >= 2 * s2 * (stats.t_quantile(0.975, 2 * n - 2) + stats.t_quantile(0.8, 2 * n - 2)) ** 2 / d2
    n = stats.repeats_needed(x, y)
    assert enough(n) and not enough(n - 1)
    assert stats.repeats_needed([1000.0, 1100.0], [1000.0, 1100.0]) is None  # no difference


@pytest.fixture
def repeated(tmp_path):
    """A sweep with repeats=3: one_device r1, mirrored r2 overlapping it, central r2 clearly
    faster, mirrored r1 (one run), a failed and a diverged run."""
    client, uri = new_store(tmp_path)
    exp = client.create_experiment("distexp", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp, run_name="sweep-r", tags={
        "distexp.sweep_id": "r", "distexp.run_kind": "sweep"}).info.run_id
    num = iter(range(100))

    def job(strategy, replicas, rates, status="FINISHED", extra_tags=None):
        for i, rate in enumerate(rates):
            n = next(num)
            overrides = f"strategy={strategy} cpu_replicas={replicas} repeats=3 repeat={i}"
            tags = {"distexp.sweep_id": "r", "distexp.run_kind": "job", "mlflow.parentRunId": parent,
                    "distexp.job_num": str(n), "distexp.overrides": overrides, **(extra_tags or {})}
            metrics = _perf(rate, 0.01 * rate) if rate else {}
            _run(client, exp, f"{strategy}-r{replicas}", status, _job(strategy, replicas, 64 * replicas),
                 metrics, tags)

    job("one_device", 1, [900.0, 1000.0, 1100.0])
    job("mirrored", 2, [950.0, 1050.0, 1150.0])            # overlaps the baseline: ~
    job("central", 2, [1800.0, 2000.0, 2200.0])            # 2x, clearly: significant
    job("mirrored", 1, [1020.0])                           # one run of a 1-replica strategy
    job("mirrored", 4, [None], status="FAILED")
    job("central", 4, [3000.0], status="FAILED", extra_tags={"distexp.diverged": "true"})
    client.set_terminated(parent, "FINISHED")
    return uri, tmp_path


def test_interval_and_verdict_come_from_the_repeats(repeated):
    uri, tmp_path = repeated
    rows, out, md = report.build(uri, sweep_id="r", out=tmp_path / "rep", log=False)
    by = {(r.strategy, r.replicas, r.shown_status): r for r in rows}
    base = by[("one_device", 1, "FINISHED")]
    assert base.rates == [900.0, 1000.0, 1100.0] and base.rate == 1000.0 and len(base.run_ids) == 3
    assert base.significance == "baseline" and base.speedup == 1.0 and not base.significant

    mir = by[("mirrored", 2, "FINISHED")]
    assert mir.speedup == pytest.approx(1.05)  # ratio of the medians
    low, high, _ = stats.ratio_interval([950.0, 1050.0, 1150.0], [900.0, 1000.0, 1100.0])
    assert (mir.speedup_low, mir.speedup_high) == (pytest.approx(low), pytest.approx(high))
    assert low < 1 < high and not mir.significant and mir.significance == "~"
    assert mir.repeats_needed == stats.repeats_needed([950.0, 1050.0, 1150.0], [900.0, 1000.0, 1100.0])
    assert mir.repeats_needed > 3

    cen = by[("central", 2, "FINISHED")]
    logs = [math.log(v) for v in (900.0, 1000.0, 1100.0)]
    m = sum(logs) / 3
    se = math.sqrt(2 * (sum((v - m) ** 2 for v in logs) / 2) / 3)
    assert cen.speedup == pytest.approx(2.0) and cen.significant and cen.significance == "significant"
    assert cen.speedup_low == pytest.approx(2 * math.exp(-2.776445 * se), rel=1e-6)
    assert cen.speedup_high == pytest.approx(2 * math.exp(2.776445 * se), rel=1e-6)
    assert cen.efficiency == pytest.approx(1.0)

    one = by[("mirrored", 1, "FINISHED")]  # one run: within-run only, never significant
    assert one.significance == Significance.WITHIN_RUN and not one.significant
    assert "1 replica: overhead vs one_device" in one.baseline and one.efficiency is None

    failed, diverged = by[("mirrored", 4, "FAILED")], by[("central", 4, "DIVERGED")]
    for r in (failed, diverged):
        assert r.rate is None and r.speedup is None and r.rates == []
    assert diverged.baseline == "n/a (diverged)" and failed.baseline == "n/a (failed)"

    line = {r.split(" | ")[0].strip("| ") + r.split(" | ")[2]: r for r in md.splitlines()
            if r.startswith("| ")}
    assert "~ 1.05x [" in line["mirrored2"] and "runs each would resolve it" in line["mirrored2"]
    assert "2.00x [" in line["central2"] and "~" not in line["central2"].split(" | ")[6]
    assert "(within run)" in line["mirrored1"] and "no significance" in line["mirrored1"]
    assert meaning.NOT_MEANINGFUL in line["central2"]  # dataset=synthetic: random labels
    assert "| DIVERGED |" in line["central4"]

    with open(out / "report.csv") as f:
        got = {(r["strategy"], r["replicas"], r["status"]): r for r in csv.DictReader(f)}
    assert {"speedup", "speedup_low", "speedup_high", "significant"} <= set(got[("central", "2", "FINISHED")])
    assert got[("central", "2", "FINISHED")]["significant"] == "True"
    assert got[("mirrored", "2", "FINISHED")]["significant"] == "False"
    assert float(got[("mirrored", "2", "FINISHED")]["speedup_low"]) == pytest.approx(low)
    assert got[("central", "4", "DIVERGED")]["examples_per_sec"] == ""


def test_one_run_each_claims_no_significance(tmp_path):
    """The store of test_report (one run per job): mirrored x2 at 1.80x +- 0.07 within its run
    still gets no significance."""
    client, uri, pid, sweep_dir = report_store(tmp_path)
    rows, _, md = report.build(uri, log=False)
    mir = [r for r in rows if r.run_name == "mirrored-r2"][0]
    assert mir.speedup_low > 1 and mir.significance == Significance.WITHIN_RUN and not mir.significant
    assert mir.speedup_low == pytest.approx(mir.speedup - mir.speedup_ci95)


def test_gpu_peaks_come_from_the_table_or_not_at_all():
    flops, source = peaks.gpu_peak("NVIDIA A100-SXM4-80GB", "bfloat16")
    assert flops == 312e12 and "A100" in source and "datasheet" in source
    assert peaks.gpu_peak("NVIDIA A100-PCIE-40GB", "tfloat32")[0] == 156e12
    assert peaks.gpu_peak("NVIDIA H100 80GB HBM3", "bfloat16")[0] == pytest.approx(989.5e12)
    assert peaks.gpu_peak("NVIDIA H100 PCIe", "float32")[0] == 51e12
    assert peaks.gpu_peak("Tesla V100-SXM2-16GB", "float16")[0] == 125e12
    assert peaks.gpu_peak("Tesla V100S-PCIE-32GB", "float32")[0] == 16.4e12
    assert peaks.gpu_peak("Tesla T4", "float16")[0] == 65e12
    assert peaks.gpu_peak("NVIDIA L4", "bfloat16")[0] == 121e12
    # refuse rather than guess: unknown devices, ambiguous names, dtypes without a figure
    for name, dtype in [("NVIDIA A10G", "float32"), ("Tesla V100", "float32"),
                        ("Tesla T4", "bfloat16"), ("", "float32")]:
        assert peaks.gpu_peak(name, dtype) is None, name
    with pytest.raises(ValueError, match="dtype: received 'fp8'"):
        peaks.gpu_peak("NVIDIA A100-SXM4-80GB", "fp8")
    assert peaks.dtype_for("float32", "NVIDIA A100-SXM4-80GB") == "tfloat32"
    assert peaks.dtype_for("float32", "Tesla T4") == "float32"
    assert peaks.dtype_for("mixed_bfloat16", "NVIDIA L4") == "bfloat16"


def test_accuracy_on_random_labels_is_not_meaningful():
    assert not meaning.accuracy_meaningful("synthetic")
    assert meaning.accuracy_meaningful("digits") and meaning.accuracy_meaningful("mnist")
    assert "matmul" in meaning.peak_source(None)
    assert meaning.peak_source("NVIDIA A100 datasheet") == "NVIDIA A100 datasheet"


def test_repeats_is_one_number_and_repeat_is_the_sweepers(tmp_path):
    from hydra.core.global_hydra import GlobalHydra

    from distexp.errors import UserError

    try:
        sweeper = _sweeper(tmp_path)
        with pytest.raises(UserError, match=r"repeats: received a sweep \(repeats=2,3\)"):
            sweeper.sweep(["strategy=one_device,mirrored", "repeats=2,3"])
        with pytest.raises(UserError, match="repeat: set by the sweeper"):
            sweeper.sweep(["repeat=1"])
    finally:
        GlobalHydra.instance().clear()


def test_baseline_is_the_closest_one_device_config(tmp_path):
    """one_device run with cpu_replicas=1 and =2 (two configs): a 1-replica mirrored job with
    cpu_replicas=1 is compared with the one_device job set up the same way, not the pool."""
    client, uri = new_store(tmp_path)
    exp = client.create_experiment("distexp", artifact_location=(tmp_path / "art").as_uri())
    client.create_run(exp, run_name="sweep-c", tags={"distexp.sweep_id": "c",
                                                     "distexp.run_kind": "sweep"})
    for strategy, cpus, rates in [("one_device", 1, [900.0, 1000.0, 1100.0]),
                                  ("one_device", 2, [500.0, 520.0, 540.0]),
                                  ("mirrored", 1, [950.0, 1000.0, 1050.0])]:
        for i, rate in enumerate(rates):
            tags = {"distexp.sweep_id": "c", "distexp.run_kind": "job",
                    "distexp.overrides": f"strategy={strategy} cpu_replicas={cpus} repeat={i}"}
            _run(client, exp, f"{strategy}-{cpus}", "FINISHED", _job(strategy, 1, 64),
                 _perf(rate, 1.0), tags)
    rows, _, _ = report.build(uri, sweep_id="c", out=tmp_path / "rep", log=False)
    mir = [r for r in rows if r.strategy == "mirrored"][0]
    assert mir.speedup == pytest.approx(1.0) and mir.significance == "~"
    assert mir.baseline.startswith("one_device r1 (weak, same cpu_replicas=1)")
    od2 = [r for r in rows if r.run_name == "one_device-2"][0]
    assert od2.significance == "baseline" and od2.rate == 520.0


def test_datasheet_peak_sums_known_gpus_and_refuses_an_unknown_one():
    """What the trainer uses for perf/peak_flops on GPUs: the datasheet sum, else None (measured)."""
    from distexp.figures import peaks

    two = peaks.datasheet_peak(["NVIDIA A100-SXM4-80GB"] * 2, "mixed_bfloat16")
    assert two[0] == 2 * peaks.gpu_peak("NVIDIA A100-SXM4-80GB", "bfloat16")[0]
    assert two[1].startswith("datasheet: 2 x NVIDIA A100-SXM4-80GB bfloat16")
    assert peaks.datasheet_peak(["NVIDIA A100-SXM4-80GB", "Some Future GPU"], "float32") is None
    assert peaks.datasheet_peak([], "float32") is None
