"""steps_per_execution=auto's decision logic (distexp.train.autotune) on synthetic timings: no TF."""
from __future__ import annotations

import random

import pytest

from distexp.train import autotune


def drive(tuner, per_step, steps=5000, seed=0):
    """Run a fake loop: a call of k steps takes per_step(k, rng) seconds per step."""
    rng = random.Random(seed)
    done = 0
    sizes = []
    while done < steps:
        size = tuner.size()
        n = min(size, tuner.warmup_left()) if tuner.warmup_left() else size
        sizes.append(n)
        tuner.observe(size, n, per_step(size, rng) * n)
        done += n
    return sizes


def overhead(call_s, step_s, noise=0.05):
    return lambda k, rng: (step_s + call_s / k) * (1 + rng.gauss(0, noise))


def test_warmup_traces_both_functions_and_never_crosses_its_end():
    t = autotune.Tuner(cap=64, warmup_steps=5)
    sizes = drive(t, overhead(0.003, 0.005), steps=5)
    assert sizes == [1, 2, 2]
    t = autotune.Tuner(cap=64, warmup_steps=4)
    assert drive(t, overhead(0.003, 0.005), steps=4) == [1, 2, 1]


@pytest.mark.parametrize("noise", [
    lambda k, rng: 0.008 * rng.lognormvariate(0, 0.3),   # skewed, 30 %
    lambda k, rng: 0.008 * (1 + rng.gauss(0, 0.2)),      # 20 %
])
def test_noisy_but_equal_timings_do_not_grow(noise):
    """Per-step time independent of k: any growth is a false positive. A 95 % interval gives
    ~2.5 % (one tail) per decision: across 200 fake runs, at most 5 % grow at all."""
    ks = []
    for seed in range(200):
        t = autotune.Tuner(cap=128, warmup_steps=5)
        drive(t, noise, seed=seed)
        assert t.done
        ks.append(t.k)
    assert sum(k > 1 for k in ks) <= 10, ks
    assert ks[0] == 1


def test_clear_overhead_grows_until_it_stops_mattering():
    # 3 ms per call, 5 ms per step: 1 -> 4 saves 28 %, 16 -> 64 saves 2.6 %
    t = autotune.Tuner(cap=128, warmup_steps=5)
    drive(t, overhead(0.003, 0.005, noise=0.01))
    assert t.done and t.k >= 8, t.history
    assert t.reason


def test_heavy_noise_stops_early_rather_than_guess():
    t = autotune.Tuner(cap=128, warmup_steps=5)
    drive(t, overhead(0.003, 0.005, noise=0.5))
    assert t.done and t.k <= 8


def test_cap_and_budget():
    # no per-step cost at all beyond the call: it would grow forever without caps
    t = autotune.Tuner(cap=16, warmup_steps=5)
    drive(t, overhead(0.01, 0.0001, noise=0.01))
    assert t.k == 16 and "cap" in t.reason
    t = autotune.Tuner(cap=20, warmup_steps=5)  # 1 -> 4 -> 16 -> 20 (the cap, not 64)
    drive(t, overhead(0.01, 0.0001, noise=0.01))
    assert t.k == 20
    # 30 ms per step + 50 ms per call: at k=4 (42.5 ms/step) a 16-step call would take 0.68 s
    t = autotune.Tuner(cap=128, warmup_steps=5)
    drive(t, overhead(0.05, 0.03, noise=0.01))
    assert t.k == 4 and "16 steps would take over 0.5 s" in t.reason, t.reason


def test_cost_is_compared_and_wall_time_sets_the_budget():
    """The loop passes CPU time as the cost: wall time swinging 2x with the machine's load does
    not hide a per-call CPU overhead."""
    t = autotune.Tuner(cap=128, warmup_steps=5)
    rng = __import__("random").Random(1)
    while not t.done:
        size = t.size()
        n = min(size, t.warmup_left()) if t.warmup_left() else size
        cpu = (0.005 + 0.003 / size) * n * (1 + rng.gauss(0, 0.02))
        t.observe(size, n, cpu * rng.uniform(1, 3), cost=cpu)
    assert t.k >= 16, t.history


def test_cut_short_calls_are_not_samples():
    t = autotune.Tuner(cap=64, warmup_steps=0)
    t.observe(1, 1, 1.0)          # settle k=1
    t.observe(4, 1, 100.0)        # cut short: ignored, turn unchanged
    assert t.size() == 4 and not t._per_step


def test_cap_one_is_final():
    t = autotune.Tuner(cap=1, warmup_steps=5)
    assert t.done and t.size() == 1


def test_caps_and_fit_rule():
    assert autotune.cap_for(22, None, 0) == 22
    assert autotune.cap_for(500, 10, 0) == 10
    assert autotune.cap_for(None) == autotune.MAX_K
    assert autotune.fit_k(22) == 11 and autotune.fit_k(60) == 15 and autotune.fit_k(13) == 13
    assert autotune.fit_k(17) == 1 and autotune.fit_k(64, 10) == 8
    assert autotune.fit_k(3, None, 3 - 1) == 1  # 3 steps, 1 warm-up: a 3-step call is all warm-up


def test_welch_interval():
    from distexp.figures.stats import welch

    diff, half, df = welch([1.0, 1.1, 0.9, 1.0], [0.5, 0.6, 0.4, 0.5])
    # equal spreads, 4 a side: df 6, t(0.975, 6) = 2.447, se = sqrt(2 * 0.00667 / 4)
    assert (diff, df) == (pytest.approx(0.5), pytest.approx(6))
    assert half == pytest.approx(2.4469 * (2 * 0.02 / 3 / 4) ** 0.5, rel=1e-3)
    assert welch([1.0, 1.0], [2.0, 2.0]) == (-1.0, 0.0, float("inf"))
    assert welch([1.0], [2.0, 3.0]) is None


def _schedule(configured, **kw):
    said = []
    s = autotune.Schedule(configured)
    args = dict(steps_per_epoch=100, every=0, log_every=0, warmup=5, lockstep=False,
                on_device=False, strategy="mirrored")
    args.update(kw)
    s.begin(announce=lambda k, why: said.append((k, why)), **args)
    return s, said


def test_schedule_is_the_one_owner_of_k():
    s, said = _schedule(6)
    assert s.k == 6 and said == [(6, "as configured")] and s.warmup_left() == 0
    s.observe(6, 1.0, full=True, cost=1.0)  # a fixed k does not move
    assert s.k == 6 and len(said) == 1
    s, said = _schedule("auto", lockstep=True, strategy="multiworker", steps_per_epoch=5)
    assert s.k == 5 and said[0][1].startswith("auto under multiworker: the fixed rule min(8, cap 5)")
    s, said = _schedule("auto", on_device=True)
    assert (s.k, said) == (1, [(1, "auto with dataset.on_device: one call per step")])
    # ps: a window of 10 calls per dispatch, so an epoch of 100 steps caps k at 10
    s, said = _schedule("auto", window=10)
    assert s.tuner is not None and s.tuner.cap == 10 and said == []
    # auto: the tuner's sizes, until it decides; then the decision is announced once
    s, said = _schedule("auto", warmup=3)
    sizes = []
    while s.tuner is not None and len(sizes) < 1000:
        k = s.k
        n = min(k, s.warmup_left()) if s.warmup_left() else k
        sizes.append(n)
        s.observe(n, 0.01 * n + 0.05, full=n == k, cost=0.01 * n + 0.05)  # a 50 ms call overhead
    assert sizes[:3] == [1, 2] + sizes[2:3] and len(said) == 1 and s.k == said[0][0] > 1
    s, said = _schedule("auto")
    s.finish()
    assert said == [(1, "auto kept it: the run ended before a larger value could be measured against it")] and s.k == 1


def test_a_run_too_short_to_decide_runs_one_step_per_call():
    """A first decision can take the warm-up, then 1 + up to 30 calls at k = 1 and at k = 4
    (max_samples: a fast step never fills min_seconds): 5 + 31 x 5 = 160 steps. A shorter run
    settles k = 1 at once (no 4-step function is traced for a decision that may never come)."""
    s, said = _schedule("auto", warmup=5, steps_left=159)
    assert s.tuner is None and s.k == 1 and said == [(1, (
        "auto: the run's 159 steps are too few to be sure to measure k=4 against 1 (that takes "
        "up to 160); one call per step"))]
    s, said = _schedule("auto", warmup=5, steps_left=160)
    assert s.tuner is not None and said == []
    # ps: each observation is a window of 10 calls, each an RPC round trip that k > 1 saves:
    # tuned as soon as a decision is possible, 6 x (1 + 4) x 10
    s, said = _schedule("auto", warmup=0, steps_left=299, window=10, steps_per_epoch=100)
    assert s.tuner is None and "(that takes >= 300)" in said[0][1]
    s, said = _schedule("auto", warmup=0, steps_left=300, window=10, steps_per_epoch=100)
    assert s.tuner is not None and said == []
    # an epoch of 2 steps caps the candidate at 2
    s, said = _schedule("auto", warmup=2, steps_left=90, steps_per_epoch=2)
    assert said[0][1].startswith("auto: the run's 90 steps are too few to be sure to measure k=2 "
                                 "against 1 (that takes up to 95)")


def test_the_worst_case_bound_holds_for_a_fast_step():
    """steps_to_decide is an upper bound: a tuner fed a fast step (1 ms per step, any k: no
    saving, so min_seconds never fills) decides exactly when it says, not later."""
    t = autotune.Tuner(cap=100, warmup_steps=5, cost_name="CPU")
    bound = t.steps_to_decide()
    while not t.done:
        k = t.size()
        t.observe(k, k, 0.001 * k, cost=0.001 * k)
    assert t.seen == bound and t.k == 1


def test_fit_k_for():
    assert autotune.fit_k_for(4, steps_per_epoch=20, log_every=0, after_warmup=10,
                              replicas=1) == (4, "as configured")
    assert autotune.fit_k_for("auto", steps_per_epoch=60, log_every=0, after_warmup=100,
                              replicas=1)[0] == 15
    assert autotune.fit_k_for("auto", steps_per_epoch=60, log_every=0, after_warmup=100,
                              replicas=2)[0] == 1
    from distexp.errors import UserError

    with pytest.raises(UserError, match="steps_per_execution: received 7; with loop=fit it must "
                                        "divide the 20 steps per epoch"):
        autotune.fit_k_for(7, steps_per_epoch=20, log_every=0, after_warmup=10, replicas=1)


def drive_windows(schedule, host_per_call, host_per_step, device_per_step, steps, window=10):
    """A fake accelerator loop: windows of k-step calls (one fetch each, as SyncDispatch queues
    them); the host queues a call in host_per_call + k x host_per_step s, the device runs a step
    in device_per_step s and the window takes the longer of the two."""
    done = 0
    while done < steps and schedule.tuner is not None:
        k = schedule.k
        n = k if schedule.warmup_left() else window // k * k if k < window else k
        n = min(n, schedule.warmup_left() or n, steps - done)
        calls = -(-n // k)
        launch = calls * host_per_call + n * host_per_step
        wall = max(launch, n * device_per_step) + 1e-5
        schedule.observe(n, wall, full=n == (k if schedule.warmup_left() else
                                             window // k * k if k < window else k),
                         cost=launch, launch=launch)
        done += n
    return done


def _gpu_schedule(steps_left=110):
    said = []
    s = autotune.Schedule("auto")
    s.begin(announce=lambda k, why: said.append((k, why)), steps_per_epoch=22, every=0,
            log_every=0, warmup=5, lockstep=False, on_device=False, strategy="one_device",
            steps_left=steps_left, window_steps=10)
    return s, said


def test_accelerator_auto_keeps_k1_when_the_host_keeps_ahead_within_the_first_epoch():
    """The default job on a GPU (22 steps per epoch, 110 in all): queueing a step costs the
    host 0.1 ms, the device runs it in 2.6 ms: k=1, decided after warm-up + one window."""
    s, said = _gpu_schedule()
    done = drive_windows(s, 1e-4, 0.0, 2.6e-3, steps=110)
    assert said and said[0][0] == 1, said
    assert done == 15, done           # 5 warm-up steps + one window of 10: in the first epoch
    assert "never waited" in said[0][1]


def test_accelerator_auto_fits_k_to_the_launch_cost():
    """1 ms to launch a call, 0.05 ms of host work per step, 0.2 ms of device per step: k=4 is
    still host-bound, k=16 keeps ahead (0.11 ms host < 0.2 ms device); 64 is not 5 % faster."""
    s, said = _gpu_schedule(steps_left=100000)
    drive_windows(s, 1e-3, 5e-5, 2e-4, steps=100000)
    assert said and said[0][0] == 16, said


def test_accelerator_auto_is_not_refused_for_a_short_run():
    s, said = _gpu_schedule(steps_left=110)
    assert s.tuner is not None and not said
    s, said = _gpu_schedule(steps_left=12)   # shorter than warm-up + one window
    assert said[0][0] == 1 and "too few" in said[0][1]
