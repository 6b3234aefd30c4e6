"""`steps_per_execution` (k): how many steps one call runs. This module is its one owner, for
both loops (pure Python: no TensorFlow):

- `Schedule` (loop=custom): the run's k, fixed (as configured; `auto`'s fixed rules) or measured
  by a `Tuner`. The dispatcher is given the schedule and reads k from it for every call (Orbit
  passes steps_per_loop into the controller); the loop only reports each call's cost to it.
- `fit_k_for` (loop=fit): Keras takes k once, at compile time.

`steps_per_execution=auto` with loop=custom: k is measured at the start of the run (the custom
loop feeds the schedule the wall and CPU time of each call).

The per-step time at k steps per call is about s + c / k (s: the step's own work, c: the cost of
one call: Python, dispatch, fetching the losses). Going from k to 4k saves 3c / 4k per step, which
matters while c is large against s and stops mattering soon after. The tuner measures that
saving instead of assuming it:

- Warm-up (the run's `warmup_steps`): one 1-step call, then 2-step calls, so both compiled
  functions (one step; k steps in a `tf.while_loop`) are traced before anything is measured.
  Calls never cross the warm-up's end (so no timed call contains a warm-up step).
- Tuning: starting at k = 1, calls of k and 4k steps (`factor`) alternate (so a slow period of
  the machine hits both; a side that has enough samples gives way); the first call at each size is
  not used. Once each side has at least `samples` calls and `min_seconds` of cost (or
  `max_samples` calls), their mean per-step costs
  are compared with a Welch interval (Student t, 95 %, two-sided): k becomes 4k only if 4k is
  cheaper by more than the interval (the last candidate is the cap itself when 4k would pass it).
  Otherwise, or when k reached the cap, or when the next candidate's call
  would be predicted (from wall time) to take more than `budget_s` (TF PR 41742: ~0.2-1 s per
  execution), k is final.
- The cost compared is what the loop passes: distexp's custom loop passes the process's CPU time
  over the call (all threads). The per-call overhead is host CPU work, and CPU time is far less
  sensitive than wall time to other processes on the machine (measured on the 2-core machine
  under load 6: +/-3 % per call against +/-50 % for wall time), where wall-time comparisons of
  a few calls would almost never be significant. Without a CPU figure the wall time is used.
- Noisy-but-equal timings therefore keep k (a false grow needs a 2.5 % tail event), a clear
  per-call overhead grows it.

On accelerator replicas (GPU, TPU) the dispatcher queues a window of calls and fetches their
results once, so the host runs ahead of the device for as long as queueing a step costs it less
than the device takes to run one; k > 1 pays only where it does not. `auto` there is a
`LaunchTuner`, decided per window (one fetch each) by wall time: after the warm-up, one window at
k = 1. If the host spent at most `AHEAD` of the window's wall time queueing its calls, the device
never waited for it: k = 1 is final (within the first epoch of the default job: warm-up 5 +
window 10 steps). Else k grows by `factor` per window while each is at least `GAIN` faster per
step than the one before (a k that is not goes back to the one before) and the host still bounds
the window; the cap and budget as above. One window per size, so that the decision fits in a
short run's first epoch: it assumes a host that other processes do not load (a larger k that
is not faster is undone by the GAIN check); a CPU's cost is measured by the Tuner instead.

Calls cut short (an epoch's end, a checkpoint) train and are timed as usual but are not samples.
The chosen k is the one the rest of the run uses; every step, tuning included, is timed and
reported by the usual definitions (a call's interval shared by its steps).
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional

from distexp.figures.stats import welch

MAX_K = 128
FIXED_K = 8  # multiworker: every worker must run the same call sizes; no per-worker timing
FIT_MAX_K = 16

def cap_for(*limits: Optional[int], max_k: int = MAX_K) -> int:
    """The largest k allowed: the smallest of the positive limits (epoch length, checkpoint
    interval, log_every_steps) and max_k."""
    return max(1, min([max_k] + [int(v) for v in limits if v]))


def fit_k(steps_per_epoch: int, *limits: Optional[int]) -> int:
    """`loop=fit`: Keras takes k once, at compile time, and k must divide the steps per epoch:
    the largest divisor of steps_per_epoch that is <= FIT_MAX_K and the caps."""
    cap = cap_for(*limits, max_k=FIT_MAX_K)
    return max(d for d in range(1, cap + 1) if steps_per_epoch % d == 0)


class Tuner:
    def __init__(self, cap: int, warmup_steps: int, *, budget_s: float = 0.5, samples: int = 5,
                 min_seconds: float = 0.5, max_samples: int = 30, parallel: int = 1,
                 factor: int = 4, cost_name: str = "wall"):
        self.cap = max(1, int(cap))
        self.warmup = max(0, int(warmup_steps))
        self.budget_s, self.samples = budget_s, samples
        self.min_seconds, self.max_samples = min_seconds, max_samples
        self.parallel = parallel  # ps: steps of that many workers share one measured interval
        self.factor = factor
        self.cost_name = cost_name  # what `cost` is, for the printed decision
        self.k = 1
        self.seen = 0                      # steps observed so far
        self.done = self.cap == 1
        self.reason = "cap is 1" if self.done else ""
        self.history: List[str] = []       # one line per decision
        self._turn = 0                     # alternation: 0 -> k, 1 -> the candidate
        self._per_step: Dict[int, List[float]] = {}   # the compared cost, per step
        self._wall: Dict[int, List[float]] = {}       # wall seconds per step (the budget)
        self._settled: set = set()

    # -- what the loop asks -------------------------------------------------------------------
    def size(self) -> int:
        """Steps per call for the next call."""
        if self.done:
            return self.k
        if self.seen < self.warmup:
            return 1 if self.seen == 0 else min(2, self.cap)
        return self._expected()

    def _expected(self) -> int:
        """Alternate k and the candidate; a side that has enough samples gives way."""
        a = self._enough(self._per_step.get(self.k, []), self.k)
        b = self._enough(self._per_step.get(self._big(), []), self._big())
        side = 1 if a and not b else 0 if b and not a else self._turn
        return self.k if side == 0 else self._big()

    def warmup_left(self) -> int:
        return max(0, self.warmup - self.seen)

    def steps_to_decide(self, window: int = 1) -> int:
        """The most steps a first decision can take: the warm-up, then an unused first call and
        up to `max_samples` calls at k = 1 and at the candidate. Fewer suffice only when
        `min_seconds` fills first, i.e. for slow steps, where a call's overhead is too small a
        part of a step for k > 1 to matter. A run shorter than this might never decide, and what
        k > 1 could save over it (the default model: ~0.2 ms a step) is less than tracing the
        candidate's function costs (~0.2 s): k = 1 without tracing it.

        Under ps (`window` calls per observation) the fewest steps instead (`samples` calls a
        side): a scheduled call is an RPC round trip of milliseconds, so k > 1 pays its trace
        back within a few hundred steps, and a run that can decide is worth tuning."""
        samples = self.max_samples if window == 1 else self.samples
        return self.warmup + (samples + 1) * (1 + self._big()) * window

    def observe(self, size: int, steps: int, seconds: float, full: Optional[bool] = None,
                cost: Optional[float] = None) -> None:
        """Calls of `size` steps ran `steps` steps in `seconds` (wall time from before the call to
        after its results were on the host); `cost`: what is compared (e.g. CPU seconds over the
        same span; default: the wall time). `full`: not cut short (default: steps == size; ps
        passes whether its window of calls was complete)."""
        first = self.seen
        self.seen += steps
        if self.done or first < self.warmup:
            return
        if size != self._expected() or not (steps == size if full is None else full):
            return  # cut short (epoch end, checkpoint) or not ours: not a sample
        self._turn = 0 if size == self._big() else 1
        if size not in self._settled:
            self._settled.add(size)
            return
        self._per_step.setdefault(size, []).append((seconds if cost is None else cost) / steps)
        self._wall.setdefault(size, []).append(seconds / steps)
        self._decide()

    def stop(self, reason: str) -> None:
        if not self.done:
            self.done, self.reason = True, reason

    # -- the decision ---------------------------------------------------------------------------
    def _enough(self, values: List[float], size: int) -> bool:
        return len(values) >= self.max_samples or (
            len(values) >= self.samples and sum(values) * size >= self.min_seconds)

    def _big(self) -> int:
        """The candidate: factor x k, or the cap if that is smaller."""
        return min(self.factor * self.k, self.cap)

    def _decide(self) -> None:
        big = self._big()
        a, b = self._per_step.get(self.k, []), self._per_step.get(big, [])
        if not (self._enough(a, self.k) and self._enough(b, big)):
            return
        diff, half, _ = welch(a, b)  # 95 %
        ma, mb = statistics.fmean(a), statistics.fmean(b)
        line = (f"{self.cost_name} ms/step: k={self.k} {1e3 * ma:.3f} (n={len(a)}), k={big} "
                f"{1e3 * mb:.3f} (n={len(b)}), difference {1e3 * diff:+.3f} "
                f"+/- {1e3 * half:.3f} ms (95 %)")
        self.history.append(line)
        if diff <= half:
            return self.stop(f"k={big} not faster beyond the 95 % interval: {line}")
        wall = statistics.fmean(self._wall[big])
        self.k = big
        self._per_step, self._wall = {}, {}  # the next comparison is measured afresh
        self._turn = 0
        nxt = self._big()
        if nxt == self.k:
            return self.stop(f"k reached the cap {self.cap}; {line}")
        if nxt * wall * self.parallel > self.budget_s:
            return self.stop(f"a call of {nxt} steps would take over {self.budget_s} s; {line}")


class LaunchTuner:
    """`auto` on accelerator replicas: k fitted to the host's launch cost, one window a size."""

    AHEAD = 0.5   # the host queued the window in at most this share of its wall time
    GAIN = 0.05   # a larger k must be this much faster per step

    def __init__(self, cap: int, warmup_steps: int, *, budget_s: float = 0.5, factor: int = 4):
        self.cap = max(1, int(cap))
        self.warmup = max(0, int(warmup_steps))
        self.budget_s, self.factor = budget_s, factor
        self.k = 1
        self.seen = 0
        self.done = self.cap == 1
        self.reason = "cap is 1" if self.done else ""
        self.history: List[str] = []
        self._before: Optional[tuple] = None   # (k, wall seconds per step) of the last window

    def size(self) -> int:
        if self.done or self.seen >= self.warmup:
            return self.k
        return 1 if self.seen == 0 else min(2, self.cap)

    def warmup_left(self) -> int:
        return max(0, self.warmup - self.seen)

    def steps_to_decide(self, window_steps: int) -> int:
        """The steps to the first decision (whether k = 1 keeps the device busy)."""
        return self.warmup + window_steps

    def observe(self, size: int, steps: int, seconds: float, full: Optional[bool] = None,
                cost: Optional[float] = None, launch: Optional[float] = None) -> None:
        """A window of `size`-step calls ran `steps` steps in `seconds` (wall, fetch included);
        the host spent `launch` seconds of it queueing the calls."""
        first = self.seen
        self.seen += steps
        if (self.done or first < self.warmup or size != self.k or launch is None
                or not (steps == size if full is None else full)):
            return
        per = seconds / steps
        line = (f"k={size}: the host queued {steps} steps in {1e3 * launch:.2f} ms, the window "
                f"took {1e3 * seconds:.2f} ms")
        self.history.append(line)
        if self._before is not None and per > (1 - self.GAIN) * self._before[1]:
            self.k = self._before[0]
            return self.stop(f"k={size} not {self.GAIN:.0%} faster per step than "
                             f"k={self.k} ({1e3 * per:.3f} vs {1e3 * self._before[1]:.3f} ms); "
                             f"{line}")
        if launch <= self.AHEAD * seconds:
            return self.stop(f"auto on an accelerator: {line}, so the device never waited for "
                             "the host")
        nxt = min(self.factor * self.k, self.cap)
        if nxt == self.k:
            return self.stop(f"k reached the cap {self.cap}; {line}")
        if nxt * per > self.budget_s:
            return self.stop(f"a call of {nxt} steps would take over {self.budget_s} s; {line}")
        self._before, self.k = (self.k, per), nxt

    def stop(self, reason: str) -> None:
        if not self.done:
            self.done, self.reason = True, reason


class Schedule:
    """The run's steps_per_execution for loop=custom: what every call's size comes from.

    Made before the dispatcher (which is given it and reads `k` for each call); `begin` decides
    the rule once the loop knows its caps (epoch length, checkpoint interval, progress lines):
    a configured k; `auto` under a lockstep strategy (every worker must run the same calls, and
    each would time differently): min(FIXED_K, cap); `auto` with on-device data: 1 (one call
    per step); else a Tuner. `announce(k, why)` is called once k is final."""

    def __init__(self, configured):
        self.auto = configured == "auto"
        self._k = 1 if self.auto else int(configured)
        self.tuner: Optional[Tuner] = None
        self._announce = None

    @property
    def k(self) -> int:
        """Steps per call for the next call."""
        return self.tuner.size() if self.tuner is not None else self._k

    def begin(self, *, announce, steps_per_epoch: int, every: int, log_every: int,
              warmup: int, lockstep: bool, on_device: bool, strategy: str, window: int = 1,
              parallel: int = 1, steps_left: Optional[int] = None,
              window_steps: int = 1) -> None:
        """`window`: k-step calls per dispatch (ps: a window of calls, so the caps bound it);
        `parallel`: workers whose steps share one measured interval (ps); `steps_left`: the
        steps this run will train (None: not known); `window_steps` > 1: accelerator replicas,
        about that many steps per host fetch (a LaunchTuner)."""
        self._announce = announce
        if not self.auto:
            return self._settle(self._k, "as configured")
        cap = cap_for(*(max(1, v // window) if v else v for v in (steps_per_epoch, every,
                                                                    log_every)))
        if lockstep:
            return self._settle(min(FIXED_K, cap), f"auto under {strategy}: the fixed rule "
                                f"min({FIXED_K}, cap {cap}), so that every worker runs the same "
                                "calls")
        if on_device:
            return self._settle(1, "auto with dataset.on_device: one call per step")
        if window_steps > 1:
            tuner = LaunchTuner(cap, warmup)
            need = tuner.steps_to_decide(window_steps)
        else:
            tuner = Tuner(cap, warmup, parallel=parallel, cost_name="CPU")
            need = tuner.steps_to_decide(window)
        if steps_left is not None and not tuner.done and steps_left < need:
            if window_steps > 1:
                what, takes = "time a window of one-step calls after the warm-up", need
            else:
                what = f"be sure to measure k={tuner._big()} against 1"
                takes = f"up to {need}" if window == 1 else f">= {need}"  # see steps_to_decide
            return self._settle(1, f"auto: the run's {steps_left} steps are too few to {what} "
                                f"(that takes {takes}); one call per step")
        self.tuner = tuner

    def warmup_left(self) -> int:
        """Warm-up steps the tuner still runs (no timed call may hold one)."""
        return self.tuner.warmup_left() if self.tuner is not None else 0

    def observe(self, steps: int, seconds: float, *, full: bool, cost: float,
                launch: Optional[float] = None) -> None:
        """A call (or window of calls) of `k` steps ran `steps` steps (fewer when cut short) in
        `seconds` wall time and `cost` CPU seconds; `launch`: a window's host seconds queueing."""
        if self.tuner is None:
            return
        if isinstance(self.tuner, LaunchTuner):
            self.tuner.observe(self.tuner.size(), steps, seconds, full=full, launch=launch)
        else:
            self.tuner.observe(self.tuner.size(), steps, seconds, full=full, cost=cost)
        if self.tuner.done:
            self._settle(self.tuner.k, self.tuner.reason)

    def finish(self) -> None:
        """Training is over: a tuner that had not decided stops where it is."""
        if self.tuner is not None:
            self.tuner.stop("auto kept it: the run ended before a larger value could be measured against it")
            self._settle(self.tuner.k, self.tuner.reason)

    def _settle(self, k: int, why: str) -> None:
        self._k, self.tuner = k, None
        self._announce(k, why)


def fit_k_for(configured, *, steps_per_epoch: int, log_every: int, after_warmup: int,
              replicas: int):
    """(k, why) for loop=fit. `auto`: the largest divisor of the steps per epoch <= FIT_MAX_K,
    the progress-line interval and the steps after the warm-up (at least one timed call); 1 with
    several replicas (Keras 3's multi-step fit fails under MirroredStrategy here:
    InvalidArgumentError "You must feed a value for placeholder tensor 'while/cond/Placeholder'"
    in multi_step_on_iterator, seen with 2 logical CPUs, optimizer pre-built). A k that does not
    divide the steps per epoch is refused (Keras would run extra steps)."""
    from distexp.errors import UserError

    if configured != "auto":
        k, why = int(configured), "as configured"
    elif replicas > 1:
        k, why = 1, ("auto with loop=fit and several replicas: Keras 3's multi-step fit fails "
                     "under MirroredStrategy")
    else:
        k = fit_k(steps_per_epoch, log_every, max(1, after_warmup))
        why = (f"auto with loop=fit: the largest divisor of {steps_per_epoch} steps per epoch "
               f"<= {FIT_MAX_K} and the caps")
    if steps_per_epoch % k:
        divisors = [d for d in range(1, steps_per_epoch + 1) if steps_per_epoch % d == 0]
        raise UserError(f"steps_per_execution: received {k}; with loop=fit it must divide the "
                        f"{steps_per_epoch} steps per epoch (Keras would run extra steps): "
                        f"try one of {', '.join(map(str, divisors[-6:]))} or set steps_per_epoch")
    return k, why
