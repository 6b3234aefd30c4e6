"""A sweep's decision as records, and every text made of them (no MLflow, no TensorFlow).

The sweeper decides once (distexp.sweeps.auto.Rounds: `repeats=auto` after every round,
`repeats=N` at the end): a `Decision` holds one `Record` per comparison (set-up `a` against `b`,
equal work or the baseline: the speed ratio, its interval, the outcome word, the rounds, the
method). It is stored as JSON in ``<sweep dir>/auto.json`` and in the parent run's tag
``distexp.outcomes``; every surface renders those records with the functions here: the round
line (`round_line`), the sweep's closing lines (`closing_lines`), the description's first line
(`description_line`), the report's section (`section_lines`), the UI's cells (`cell`). Nothing
reads text back. Definitions: docs/sweeps.md.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Sequence

EQUAL_WORK, BASELINE = "equal work", "baseline"
OPEN_WORD = "not settled"
AT_MARGIN = "at the margin"  # distexp.figures.sequential.at_margin: settled, not worth more rounds
CONTINUE_CAP = 5  # a continuation suggested up to this many times the planned rounds, in all
OPEN_SHORT = "open"  # where a line must be short (a round line, the console's table)


def short_word(outcome: str) -> str:
    return OPEN_SHORT if outcome == OPEN_WORD else outcome
WIDTH = 120


@dataclass
class Record:
    """One comparison: set-up `a`'s examples/s over set-up `b`'s, paired by round."""
    a: int
    b: int
    names: List[str]            # [a's name, b's name]
    kind: str                   # EQUAL_WORK | BASELINE
    ratio: Optional[float]      # geometric mean of the paired ratios (None: no paired round)
    low: Optional[float]        # its interval (None: unbounded)
    high: Optional[float]
    outcome: str                # faster | slower | equal | not settled
    rounds: int                 # paired rounds it was decided on
    method: str                 # repeated confidence intervals | fixed-sample paired t | ...
    spread: Optional[float] = None          # sd of the paired log ratios (the noise)
    rounds_needed: Optional[int] = None     # not settled: rounds that would likely settle it
    primary: bool = True        # the sweep's question: it decides when the sweep stops
    # the accuracy half: a's final eval accuracy less b's, points, paired by round (None: none)
    accuracy: Optional[float] = None
    accuracy_low: Optional[float] = None    # its interval (None: unbounded)
    accuracy_high: Optional[float] = None
    accuracy_outcome: Optional[str] = None  # more accurate | less accurate | as accurate | not settled
    accuracy_rounds: int = 0
    accuracy_spread: Optional[float] = None  # sd of the paired differences (the seed noise)
    same_maths: bool = True     # the set-ups train the same mathematics: accuracy as it stands
    # time to the target (target_accuracy set): b's time over a's (above 1: a reaches it sooner),
    # paired by round over the rounds both reached it; a miss is counted, never a time
    target: Optional[float] = None          # target_accuracy (None: no time-to-target half)
    time_ratio: Optional[float] = None
    time_low: Optional[float] = None        # its interval (None: unbounded)
    time_high: Optional[float] = None
    time_outcome: Optional[str] = None      # sooner | later | as soon | not settled | misses
    time_rounds: int = 0                    # paired rounds (both runs completed)
    time_misses: List[int] = field(default_factory=lambda: [0, 0])  # rounds a, b missed it

    @property
    def settled(self) -> bool:
        return self.outcome != OPEN_WORD


@dataclass
class Decision:
    """A sweep's comparisons, decided once."""
    repeats: str                # "auto" or the N of repeats=N
    method: str
    alpha: float                # the family's error rate (Bonferroni over the comparisons)
    margin: float
    rounds: int                 # rounds run
    horizon: int                # the planned rounds (sweep.max_repeats; N for repeats=N)
    setups: List[str]
    comparisons: List[Record] = field(default_factory=list)
    next_command: Optional[str] = None      # continues the sweep (an auto sweep not settled)
    next_rounds: Optional[int] = None
    controls: List[int] = field(default_factory=list)  # the set-ups sweep.controls added
    # each set-up's key, by index (its runs' tag distexp.setup_key: the report's and the UI's
    # rows); empty in a decision stored before runs were tagged
    setup_keys: List[str] = field(default_factory=list)
    disturbed: List[dict] = field(default_factory=list)  # runs left out of the pairs: setup,
    # name, slot, round, job, reason (distexp.sweeps.auto.Rounds: CPU/wall starved, or the job's own)
    accuracy_margin: Optional[float] = None  # points (sweep.accuracy_margin); None: stored before
    target_accuracy: Optional[float] = None  # the time-to-target half's target (None: no such half)

    @property
    def fixed(self) -> bool:
        return self.repeats != "auto"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def of(self, setup: int, kind: str) -> Optional[Record]:
        """Set-up `setup`'s comparison of `kind` (it as `a`), or None."""
        return next((r for r in self.comparisons if r.a == setup and r.kind == kind), None)


def from_json(text: Optional[str]) -> Optional[Decision]:
    """A Decision from auto.json or the parent's tag; None for anything else (an older sweep)."""
    try:
        d = json.loads(text or "")
        d["comparisons"] = [Record(**r) for r in d["comparisons"]]
        return Decision(**d)
    except (ValueError, TypeError, KeyError):
        return None


def _num(x: Optional[float]) -> str:
    return "inf" if x is None or math.isinf(x) else f"{x:.2f}"


def interval(r: Record) -> str:
    """0.72x [0.45, 1.14]"""
    if r.ratio is None:
        return "no paired rounds"
    return f"{r.ratio:.2f}x [{_num(r.low) if r.low else '0'}, {_num(r.high)}]"


def word(r: Record, margin: float, rounds: bool = True) -> str:
    """faster | slower | equal within +-5% | not settled after 10 rounds"""
    if r.outcome == "equal":
        return f"equal within +-{100 * margin:g}%"
    if r.outcome == AT_MARGIN:
        return f"at the +-{100 * margin:g}% margin" + (", not worth more rounds" * rounds)
    if r.outcome == OPEN_WORD and rounds:
        return f"{OPEN_WORD} after {r.rounds} round{'s' * (r.rounds != 1)}"
    return r.outcome


def _pt(x: Optional[float], sign: bool = False) -> str:
    return ("-inf" if sign else "inf") if x is None else f"{x:+.1f}" if sign else f"{x:.1f}"


def accuracy_text(r: Record, margin: Optional[float]) -> str:
    """The accuracy half: 'accuracy -0.1 pt [-0.6, 0.4], as accurate'; 'less accurate by 2.3 pt';
    a set-up faster but less accurate is said so ('; faster, but less accurate'); same
    mathematics, not settled: 'as it stands'. '' without an accuracy."""
    if r.accuracy is None:
        return ""
    lo = "-inf" if r.accuracy_low is None else f"{r.accuracy_low:.1f}"
    what = f"accuracy {r.accuracy:+.1f} pt [{lo}, {_pt(r.accuracy_high)}], "
    kind = r.accuracy_outcome or OPEN_WORD
    if kind == "less accurate":
        what += f"less accurate by {-r.accuracy:.1f} pt"
    elif kind == "more accurate":
        what += f"more accurate by {r.accuracy:.1f} pt"
    elif kind == "as accurate":
        what += f"as accurate (within +-{margin:g} pt)" if margin else kind
    else:
        what += "as it stands (same training)" if r.same_maths else kind
    if r.outcome == "faster" and kind == "less accurate":
        what += ": faster, but less accurate"
    elif r.outcome == "slower" and kind == "more accurate":
        what += ": slower, but more accurate"
    return what


def _x(x: Optional[float]) -> str:
    return "inf" if x is None or math.isinf(x) else f"{x:.2f}"


def _inv(x: Optional[float]) -> Optional[float]:
    """1/x of an interval's end, None standing for 0 (a low end) or inf (a high end)."""
    return None if x is None or x == 0 else 1 / x


def time_text(r: Record, margin: float) -> str:
    """The time-to-target half: 'reaches 0.95 1.30x sooner [1.10, 1.60]' (b's time over a's);
    'reaches 0.95 1.30x later [1.11, 1.67]'; 'reaches 0.95 as soon: 1.02x [0.97, 1.04], within
    +-5%'; not settled: '..., not settled'; a miss in any paired round: 'misses 0.95 in 2 of 6
    runs, the baseline in 0' or 'reaches 0.95 in all 6 runs, its control misses it in 1' (runs
    paired by round: a re-run of a disturbed round is one more, with its own seed).
    '' without a target."""
    if r.target is None:
        return ""
    t, n = f"{r.target:g}", r.time_rounds
    if r.time_outcome is None or (r.time_ratio is None and r.time_outcome != "misses"):
        return f"time to {t}: no paired runs (none with both runs' times)"
    if r.time_outcome == "misses":
        role = "its control" if r.kind == EQUAL_WORK else "the baseline"
        ka, kb = r.time_misses
        if ka:
            return f"misses {t} in {ka} of {n} run{'s' * (n != 1)}, {role} in {kb}"
        return f"reaches {t} in all {n} run{'s' * (n != 1)}, {role} misses it in {kb}"
    if r.time_outcome == "as soon":
        return (f"reaches {t} as soon: {r.time_ratio:.2f}x [{_x(r.time_low or 0)}, "
                f"{_x(r.time_high)}], within +-{100 * margin:g}%")
    later = r.time_outcome == "later" or (r.time_outcome != "sooner" and r.time_ratio < 1)
    ratio, lo, hi = ((1 / r.time_ratio, _inv(r.time_high), _inv(r.time_low)) if later
                     else (r.time_ratio, r.time_low, r.time_high))
    what = f"reaches {t} {ratio:.2f}x {'later' if later else 'sooner'} [{_x(lo or 0)}, {_x(hi)}]"
    return what if r.time_outcome in ("sooner", "later") else f"{what}, {OPEN_WORD}"


def _fixed(r: Record, rounds: bool = True) -> str:
    """' (fixed-sample, 5 rounds)' on a repeats=N comparison's speed half (' (fixed-sample)'
    without `rounds`), '' otherwise."""
    if not r.method.startswith("fixed-sample"):
        return ""
    return f" (fixed-sample, {r.rounds} rounds)" if rounds else " (fixed-sample)"


def _halves(r: Record, accuracy_margin: Optional[float], margin: float) -> str:
    """'; accuracy ...; reaches 0.95 ...': the halves after the speed half ('' where none)."""
    return "".join(f"; {x}" for x in (accuracy_text(r, accuracy_margin), time_text(r, margin))
                   if x)


def cell(r: Optional[Record], margin: float, accuracy_margin: Optional[float] = None) -> str:
    """The UI's and the table's cell: 0.72x [0.45, 1.14] not settled; accuracy -0.1 pt [-1.2,
    1.0], not settled (then the time-to-target half where there is one)"""
    if r is None:
        return "-"
    return f"{interval(r)} {word(r, margin, rounds=False)}{_fixed(r)}" + _halves(
        r, accuracy_margin, margin)


def text(r: Record, margin: float, accuracy_margin: Optional[float] = None) -> str:
    """mirrored x2 vs one_device x1 batch 128 (control), equal work: 0.72x [0.45, 1.14] slower;
    at the margin: 'about 1.04x [0.99, 1.10]: at the +-5% margin, not worth more rounds'; then
    the accuracy half (`accuracy_text`): '; accuracy -0.1 pt [-0.6, 0.4], as accurate'."""
    if r.outcome == AT_MARGIN and r.ratio is not None:
        what = f"about {interval(r)}: {word(r, margin)}"
    else:
        # 'not settled after 5 rounds' says the rounds already
        what = f"{interval(r)} {word(r, margin)}{_fixed(r, r.outcome != OPEN_WORD)}"
    return f"{r.names[0]} vs {r.names[1]}, {r.kind}: {what}" + _halves(r, accuracy_margin, margin)


HALF_CUTS = ("; accuracy ", "; reaches ", "; misses ", "; time to ")


def wrapped(line: str, width: int = WIDTH) -> List[str]:
    """A comparison's line within `width`: cut before its accuracy and time-to-target halves
    when too long (as many halves on a line as fit; continued lines indented); a heading
    before its margins."""
    if len(line) <= width:
        return [line]
    if ", margins " in line:  # a heading: its margins on a line of their own where that fits
        head, tail = line.split(", margins ", 1)
        if len(head) < width:
            return [head + ","] + _within("  margins " + tail, width)
        return _within(line, width)
    parts, rest = [], line
    while True:
        at = min((rest.find(c, 1) for c in HALF_CUTS if rest.find(c, 1) > 0), default=-1)
        if at < 0:
            break
        parts.append(rest[:at + 1])
        rest = rest[at + 2:]
    parts.append(rest)
    lines = [parts[0]]
    for part in parts[1:]:
        joined = f"{lines[-1]} {part}"
        lines[-1:] = [joined] if len(joined) <= width else [lines[-1], "  " + part]
    return [x for ln in lines for x in _within(ln, width)]


def _within(line: str, width: int) -> List[str]:
    """A line cut between words where it is longer than `width`, continued lines indented."""
    import textwrap

    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False)


def cap(d: "Decision") -> int:
    """The most rounds in all a `Continue:` line suggests: CONTINUE_CAP x the planned rounds."""
    return CONTINUE_CAP * max(d.horizon, 1)


def ordered(d: "Decision") -> List[Record]:
    """The primary comparisons (the sweep's question) first, equal work first among each."""
    return sorted(d.comparisons, key=lambda r: (not r.primary, r.kind != EQUAL_WORK))


def heading(d: Decision) -> str:
    """repeats=auto: 10 of at most 10 rounds, repeated confidence intervals, alpha 0.05 over 3
    comparisons, margin +-5%"""
    if d.fixed:
        what = f"repeats={d.repeats}: {d.rounds} round{'s' * (d.rounds != 1)}, fixed-sample (paired t)"
    elif d.rounds <= d.horizon:
        what = f"repeats=auto: {d.rounds} of at most {d.horizon} rounds, {d.method}"
    else:
        what = (f"repeats=auto: {d.rounds} rounds ({d.horizon} planned, then the alpha kept for "
                f"a continuation), {d.method}")
    n = len(d.comparisons)
    if d.accuracy_margin is None:  # a decision stored before the accuracy half
        return (f"{what}, alpha {d.alpha:g} over {n} comparison{'s' * (n != 1)}, margin "
                f"+-{100 * d.margin:g}%")
    if d.target_accuracy is None:
        return (f"{what}, alpha {d.alpha:g} over {n} comparison{'s' * (n != 1)} x 2 halves, "
                f"margins +-{100 * d.margin:g}% (speed), +-{d.accuracy_margin:g} pt (accuracy)")
    return (f"{what}, alpha {d.alpha:g} over {n} comparison{'s' * (n != 1)} x 3 halves (speed, "
            f"accuracy, time to {d.target_accuracy:g}), margins +-{100 * d.margin:g}% (speed, "
            f"time), +-{d.accuracy_margin:g} pt (accuracy)")


def next_lines(d: Decision) -> List[str]:
    """What to do about the comparisons not settled: the noise, the rounds that would likely
    settle each, the command that continues the sweep (to the fewest of those rounds)."""
    open_ = [r for r in d.comparisons if r.primary and not r.settled and r.spread is not None]
    if not open_:
        return []
    noise = max(r.spread for r in open_)
    head = (f"Not settled: the noise is {noise:.2f} (sd of the paired log ratios, "
            f"{100 * (math.exp(noise) - 1):.0f}% a round)")
    likely = sorted((r for r in open_ if r.rounds_needed), key=lambda r: r.rounds_needed)
    if not likely:
        return [head + "; no difference visible at this noise: more rounds would likely not "
                "settle it"]
    head += "; likely settled after ~" + ", ~".join(
        f"{r.rounds_needed} rounds ({r.ratio:.2f}x)" for r in likely)
    if d.next_rounds is None:
        return [head, f"More than {cap(d)} rounds (the cap: {CONTINUE_CAP}x the planned "
                f"{d.horizon}): quiet the machine (or accept that the difference is smaller than "
                "it can show), then run the sweep again"]
    if d.fixed:
        return [head + f": run it again with repeats={d.next_rounds}"]
    return [head, f"Continue: {d.next_command}" if d.next_command else ""]


def closing_lines(d: Decision, width: int = WIDTH) -> List[str]:
    """The sweep's last lines before the report and UI commands: the heading, one line per
    comparison (the sweep's question first, equal work first; the others marked as standing
    where the sweep stopped), what next (the question's comparisons only)."""
    asked = any(r.primary for r in d.comparisons)
    lines = [x for r in ordered(d) for x in wrapped(
        text(r, d.margin, d.accuracy_margin) if r.primary or not asked else
        f"as it stands: {text(r, d.margin, d.accuracy_margin)}", width)]
    return [x for x in wrapped(heading(d), width) + lines + fitted(disturbed_line(d), width)
            + [y for x in next_lines(d) for y in fitted(x, width)] if x]


def fitted(line: str, width: int = WIDTH) -> List[str]:
    """A what-next line within `width`: `Continue:` with its command on lines of their own (cut
    between words, the shell joins them again); prose wrapped, continued lines indented."""
    import textwrap

    from distexp import console_lines

    if line.startswith("Continue: "):
        return ["Continue:", *console_lines.command_lines(line[len("Continue: "):],
                                                         width=width).splitlines()]
    return textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False) or [line]


def disturbed_line(d: Decision) -> str:
    """Disturbed, left out of the pairs: one_device x1 batch 64 round 3 (job 7: CPU/wall 0.40,
    under 0.6x its set-up's median 1.25); ... ('' when none)."""
    if not d.disturbed:
        return ""
    return "Disturbed, left out of the pairs: " + "; ".join(
        f"{f['name']} round {f['round']} (job {f['job']}: {f['reason']})" for f in d.disturbed)


def section_lines(d: Decision) -> List[str]:
    """report.md's and the report console's section: a title, then closing_lines as bullets."""
    title = ("Outcome (repeats=auto)" if not d.fixed else
             f"Outcome (repeats={d.repeats}, fixed-sample)")
    return [title] + [f"  {x}" if x.startswith("  ") else f"- {x}"  # a wrapped line goes on
                      for x in closing_lines(d, WIDTH - 2)]


def _short(d: Decision, r: Record, with_interval: bool, full: bool) -> str:
    """One comparison in a round line; not `full`: the set-ups named by their role."""
    me = "control" if not full and r.a in d.controls else r.names[0]
    other = r.names[1] if full else "control" if r.kind == EQUAL_WORK else "baseline"
    what = interval(r) if with_interval else (f"{r.ratio:.2f}x" if r.ratio is not None else "-")
    shown = short_word(r.outcome)
    acc = "" if r.accuracy is None or r.same_maths else (
        f", accuracy {r.accuracy:+.1f} pt {short_word(r.accuracy_outcome or OPEN_WORD)}")
    return f"{me} vs {other}: {what} {shown}{acc}"


def round_line(d: Decision, width: int = WIDTH) -> str:
    """round 3: mirrored x2 vs one_device x1 batch 128 (control): 0.72x [0.45, 1.14] open; ...
    within `width`: the set-ups named by their role (its control, baseline), then without the
    intervals, then the open comparisons only, then cut."""
    head = f"round {d.rounds}"  # of at most d.horizon: the console's job line says it
    if not d.comparisons:
        return f"{head}: one set-up, nothing to compare"
    rs = ordered(d)
    line = ""
    for with_iv, full_b, shown in ((True, True, rs), (True, False, rs), (False, False, rs),
                                   (False, False, [r for r in rs if not r.settled] or rs)):
        rest = len(rs) - len(shown)
        line = f"{head}: " + "; ".join(_short(d, r, with_iv, full_b) for r in shown) + (
            f"; {rest} settled" if rest else "")
        if len(line) <= width:
            return line
    return line[: width - 1] + "…"


def description_line(d: Decision, width: int = WIDTH) -> str:
    """The parent run's and the experiment's description, first line (read uncut above MLflow's
    runs table): the equal-work comparisons first, as many as fit, the rest counted."""
    rs = ordered(d)
    if not rs:
        return f"Outcome: one set-up, nothing to compare ({d.rounds} rounds)"
    rounds = f"{d.rounds} round{'s' * (d.rounds != 1)}" + (", fixed-sample" if d.fixed else "")
    shown = list(rs)
    while True:
        more = f"; +{len(rs) - len(shown)} more below" if len(shown) < len(rs) else ""
        line = ("Outcome: " + "; ".join(f"{r.names[0]} vs {'its control' if r.kind == EQUAL_WORK else r.names[1]}: "
                                        f"{cell(r, d.margin)}"
                                        for r in shown) + f" ({rounds}{more})")
        if len(line) <= width or len(shown) == 1:
            return line
        shown.pop()


def setup_answer(d: Decision, setup: int) -> str:
    """A set-up's name with its answer, the UI's group of its runs: "mirrored x2: 0.72x [0.45,
    1.14] not settled vs control" (its equal-work comparison), else its comparison with the
    baseline, "one_device x1 batch 128 (control): 1.61x [1.32, 1.96] faster"; "one_device x1
    batch 64: baseline"."""
    rec = d.of(setup, EQUAL_WORK) or d.of(setup, BASELINE)
    if rec is None:
        return f"{d.setups[setup]}: baseline" if any(r.b == setup for r in d.comparisons) \
            else d.setups[setup]
    return f"{d.setups[setup]}: {cell(rec, d.margin, d.accuracy_margin)}" + (
        " vs control" if rec.kind == EQUAL_WORK else "")


def setup_names(setups: Sequence[Optional[object]], strategies: Sequence[str],
                controls: Sequence[int]) -> List[str]:
    """'mirrored x2'; ' batch B' where two set-ups would read the same, and on a control;
    ' (control)' on the 1-replica set-ups sweep.controls added."""
    def first(i):
        s = setups[i]
        return f"{strategies[i]} x{s.replicas if s else '?'}"

    base = [first(i) for i in range(len(setups))]
    out = []
    for i, name in enumerate(base):
        s = setups[i]
        if s is not None and (base.count(name) > 1 or i in controls):
            name += f" batch {s.global_batch}"
        out.append(name + (" (control)" if i in controls else ""))
    return out
