"""A sweep's decision on the report's rows (distexp.report.decided): a row is the set-up its runs
are tagged with (distexp.setup_key), whatever their job numbers; runs of a sweep older than the
tag keep the report's key of then, and a continuation's tagged runs take them in."""
from __future__ import annotations

from distexp.figures import outcomes as O
from distexp.report import decided
from distexp.report.scaling import Row, add_scaling, aggregate

NAMES = ["one_device x1 batch 64", "mirrored x2", "one_device x1 batch 128 (control)"]
SETUPS = [("one_device", 1, 64, 1000.0), ("mirrored", 2, 128, 1100.0), ("one_device", 1, 128, 1500.0)]
KEYS = ["0a0a0a0a0a0a", "1b1b1b1b1b1b", "2c2c2c2c2c2c"]


def _setup_run(i: int, num: int, k: int, extra: str = "", tagged: bool = True) -> Row:
    strategy, replicas, batch, rate = SETUPS[i]
    return Row(run_id=f"id{num}", run_name="", status="FINISHED", strategy=strategy, model="cnn",
               dataset="digits", loop="custom", workers=1, replicas=replicas, global_batch=batch,
               rate=rate * (1 + 0.01 * k), ci95=None, eval_accuracy=0.9, time_to_first_step=1.0,
               job_num=num, rates=[rate * (1 + 0.01 * k)], run_ids=[f"id{num}"],
               overrides=f"strategy={strategy} gbs={batch} repeat={k}{extra}",
               setup_key=KEYS[i] if tagged else None, setup_index=i if tagged else None)


def _decided(keys=KEYS) -> O.Decision:
    m = "repeated confidence intervals"
    return O.Decision("auto", m, 0.05, 0.05, 3, 10, NAMES, [
        O.Record(1, 2, [NAMES[1], NAMES[2]], O.EQUAL_WORK, 0.72, 0.45, 1.14, "not settled", 3, m),
        O.Record(1, 0, [NAMES[1], NAMES[0]], O.BASELINE, 1.18, 0.81, 1.72, "not settled", 3, m),
        O.Record(2, 0, [NAMES[2], NAMES[0]], O.BASELINE, 1.61, 1.32, 1.96, "faster", 3, m)],
        controls=[2], setup_keys=list(keys))


def _answers(rows):
    """{(strategy, global batch): (runs, main speed-up, equal-work speed-up)}"""
    return {(r.strategy, r.global_batch): (len(r.run_ids), r.main and r.main.value,
                                           r.strong and r.strong.value) for r in rows}


def test_a_runs_set_up_tag_decides_its_row_whatever_its_job_number():
    """Job numbers that are not round x set-ups + set-up (here mirrored's are 0, 3, 6: a modulo
    would make it the baseline): each row gets its own set-up's records, one row a set-up."""
    nums = {0: [1, 4, 7], 1: [0, 3, 6], 2: [2, 5, 8]}
    rows = aggregate([_setup_run(i, nums[i][k], k) for k in range(3) for i in range(3)])
    add_scaling(rows)
    decided.apply(rows, _decided())
    assert _answers(rows) == {("one_device", 64): (3, 1.0, None),
                              ("mirrored", 128): (3, 1.18, 0.72),
                              ("one_device", 128): (3, 1.61, 1.0)}
    assert [decided.setup_of(r, _decided(KEYS[::-1])) for r in rows] == [
        2 - KEYS.index(r.setup_key) for r in rows]  # the decision's list, not the tag's index


def test_a_continued_sweep_is_one_row_per_set_up_old_runs_and_new():
    """A sweep from before the tags (its runs untagged, `sweep.max_repeats=2` in their overrides),
    continued with `sweep.max_repeats=4` (tagged): each untagged run takes its config's tag, one
    row per set-up with its 4 runs; without any tagged run the key of then holds (one row too:
    the continuation's budget is no part of a job's config)."""
    old = [_setup_run(i, 3 * k + i, k, " sweep.max_repeats=2", tagged=False)
           for k in range(2) for i in range(3)]
    new = [_setup_run(i, 3 * k + i, k, " sweep.resume=s1 sweep.max_repeats=4") for k in (2, 3)
           for i in range(3)]
    rows = aggregate(old + new)
    add_scaling(rows)
    decided.apply(rows, _decided())
    assert _answers(rows) == {("one_device", 64): (4, 1.0, None),
                              ("mirrored", 128): (4, 1.18, 0.72),
                              ("one_device", 128): (4, 1.61, 1.0)}
    assert sorted(r.setup_key for r in rows) == KEYS
    untagged = aggregate([_setup_run(i, 3 * k + i, k, f" sweep.max_repeats={2 + k}", tagged=False)
                          for k in range(4) for i in range(3)])
    assert sorted(len(r.run_ids) for r in untagged) == [4, 4, 4]


def test_an_untagged_run_gets_no_guessed_set_up():
    """An older sweep's run (no tag) is set-up job_num % len(setups) only where that set-up's
    name agrees with it: a resumed sweep whose new jobs took the next free numbers gets none."""
    d = _decided(keys=[])
    assert [decided.setup_of(_setup_run(i, i, 0, tagged=False), d) for i in range(3)] == [0, 1, 2]
    assert decided.setup_of(_setup_run(1, 4, 1, tagged=False), d) == 1  # mirrored, 4 % 3 = 1: agrees
    assert decided.setup_of(_setup_run(2, 4, 1, tagged=False), d) is None  # the control numbered 4
    assert decided.setup_of(_setup_run(0, 5, 1, tagged=False), d) is None  # the baseline numbered 5
    assert decided.setup_of(_setup_run(1, 1, 0), _decided(keys=KEYS[:2] + ["other"])) == 1
    assert decided.setup_of(_setup_run(2, 2, 0), _decided(keys=KEYS[:2] + ["other"])) is None


def test_a_decision_stored_before_the_set_up_keys_still_loads():
    """auto.json / distexp.outcomes written before `setup_keys`: it loads, lists no keys, and its
    sweep's untagged runs keep their set-up by job number where the name agrees."""
    import json

    old = json.loads(_decided().to_json())
    del old["setup_keys"]
    d = O.from_json(json.dumps(old))
    assert d is not None and d.setup_keys == [] and d.setups == NAMES
    assert decided.setup_of(_setup_run(2, 5, 1, tagged=False), d) == 2


def test_the_table_and_csv_carry_the_accuracy_difference_beside_the_speed_up():
    """issue 51 item 6: each set-up's accuracy difference from the baseline with its interval,
    the decision's record's, in the console table (beside "vs baseline") and report.csv."""
    from distexp.report import cli as report_cli
    from distexp.report import columns, table

    d = _decided()
    d.comparisons[1].accuracy, d.comparisons[1].same_maths = -0.4, True
    d.comparisons[1].accuracy_low, d.comparisons[1].accuracy_high = -1.6, 0.8
    d.comparisons[1].accuracy_outcome = O.OPEN_WORD
    d.comparisons[2].accuracy, d.comparisons[2].accuracy_outcome = -9.1, "less accurate"
    d.comparisons[2].accuracy_low, d.comparisons[2].accuracy_high = -16.6, -1.5
    rows = aggregate([_setup_run(i, 3 * k + i, k) for k in range(3) for i in range(3)])
    add_scaling(rows)
    decided.apply(rows, d)
    lines = table.table(rows, width=160).splitlines()
    # in 120 columns the accuracy column goes without its intervals, else out: no cell is cut
    short = table.table(rows, width=140).splitlines()
    assert [ln[short[0].index("acc. vs baseline"):].split("  ")[0] for ln in short[2:]] == [
        "-", "-0.4 pt as it stands", "-9.1 pt less"]
    narrow = table.table(rows).splitlines()
    assert "acc. vs baseline" not in narrow[0] and "…" not in "".join(narrow)
    assert all(len(ln) <= 120 for ln in narrow)
    assert [h.strip() for h in lines[0].split("  ") if h.strip()] == [
        "strategy", "replicas", "batch", "examples/s", "vs baseline", "acc. vs baseline",
        "at equal work", "accuracy"]
    col = lines[0].index("acc. vs baseline")
    got = {ln.split()[0] + ln.split()[2]: ln[col:].split("  ")[0] for ln in lines[2:]}
    assert got == {"one_device64": "-", "mirrored128": "-0.4 pt [-1.6, 0.8] as it stands",
                   "one_device128": "-9.1 pt [-16.6, -1.5] less"}
    head, body = report_cli.table_rows(rows)  # report.md's table
    at = head.index("accuracy vs baseline (points, paired by round)")
    assert head[at - 2:at] == ["speed-up", "verdict"]
    assert [b[at] for b in body] == ["-", "-0.4 pt [-1.6, 0.8] as it stands",
                                     "-9.1 pt [-16.6, -1.5] less"]
    csv = {(r.strategy, r.global_batch): [get(r) for name, get in columns.COLUMNS
                                          if name.startswith("accuracy_vs_baseline")]
           for r in rows}
    assert csv == {("one_device", 64): [None] * 4,
                   ("mirrored", 128): [-0.4, -1.6, 0.8, O.OPEN_WORD],
                   ("one_device", 128): [-9.1, -16.6, -1.5, "less accurate"]}
