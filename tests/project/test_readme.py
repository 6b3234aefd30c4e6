"""Every command README.md and docs/*.md show runs as shown, checked without running it: each
`python -m distexp ...` line of their shell blocks is composed by Hydra in this process, as
`python -m distexp --cfg job ...` would (a multirun: once per swept value, the swept values of a
preset's `hydra.sweeper.params` included), and each composed job passes distexp's own checks
(distexp.config.checks.validate, what the job process runs before TensorFlow starts) or is refused
with the very line the page shows under it. A command needs what it names: GPUs (checked with a
faked driver of 8), the user's package of docs/extending.md (`my_pkg`, made here with the
documented functions). `python -m distexp.parity` lines are parsed by its
parser and each strategy's job composed; `distexp.report`, `distexp.ui` and `distexp.tracking`
lines are parsed by their own argparse parsers, stopped before they do anything. No TensorFlow,
no process: the unit tier."""
from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from helpers import ROOT
from helpers.gpus import fake_driver

CONF = ROOT / "distexp" / "conf"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("", "bash", "sh", "shell", "console")  # a fence's language that holds commands
SEPARATORS = ("&&", "||", ";", "|")


def shell_lines(text: str) -> Iterator[Tuple[int, str]]:
    """(line number, line) of each command line in the page's shell blocks; a line continued with
    a backslash is joined to the next ones; a `$ ` prompt is dropped."""
    fence, held, start = None, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*```(\w*)", line)
        if m:
            fence = m.group(1) if fence is None else None
            continue
        if fence not in SHELL:
            continue
        if not held:
            start = n
        held += line.rstrip()
        if held.endswith("\\"):
            held = held[:-1] + " "
            continue
        yield start, re.sub(r"^\s*\$ ", "", held)
        held = ""


def commands(page: Path) -> Iterator[Tuple[str, str, List[str]]]:
    """(where, module, arguments) of each `python -m distexp[.module] ...` the page shows."""
    for n, line in shell_lines(page.read_text()):
        if not re.search(r"\bpython3? +-m +distexp\b", line):
            continue  # output, or another program
        line = re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", "1", line)  # $SLURM_JOB_ID and the like
        try:
            words = shlex.split(line, comments=True)
        except ValueError as ex:  # an unclosed quote: a shell would not run it either
            yield f"{page.relative_to(ROOT)}:{n}", f"(a line the shell cannot split: {ex})", []
            continue
        segments, cur = [], []
        for w in words:
            if w in SEPARATORS:
                segments.append(cur)
                cur = []
            else:
                cur.append(w)
        for seg in [*segments, cur]:
            for i in range(len(seg) - 2):
                if re.fullmatch(r"python3?", Path(seg[i]).name) and seg[i + 1] == "-m" \
                        and seg[i + 2].split(".")[0] == "distexp":
                    yield f"{page.relative_to(ROOT)}:{n}", seg[i + 2], seg[i + 3:]


COMMANDS = [c for page in PAGES for c in commands(page)]


# docs/extending.md's package: its functions as the page documents them (not called here)
MY_PKG = {"exp": "def build(input_shape, num_classes):\n    pass\n\n\n"
                 "def load(seed, n=10000):\n    pass\n",
          "tasks": "def make():\n    pass\n",
          "data": "def load(seed):\n    pass\n"}


@pytest.fixture(scope="module")
def compose(tmp_path_factory):
    """compose(overrides) -> the config with its hydra node, as `--cfg all` would print it; a
    list composed once is not composed again (many commands share their jobs)."""
    from hydra import compose as hcompose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from distexp.config import schema

    schema.register()
    GlobalHydra.instance().clear()
    done = {}
    user = tmp_path_factory.mktemp("user")
    (user / "my_pkg").mkdir()
    (user / "my_pkg" / "__init__.py").write_text("")
    for name, text in MY_PKG.items():
        (user / "my_pkg" / f"{name}.py").write_text(text)
    sys.path.insert(0, str(user))

    def _compose(overrides):
        key = tuple(overrides)
        if key not in done:
            done[key] = hcompose(config_name="config", overrides=list(overrides),
                                 return_hydra_config=True)
        return done[key]

    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
            yield _compose
    finally:
        GlobalHydra.instance().clear()
        sys.path.remove(str(user))
        for name in [m for m in sys.modules if m.split(".")[0] == "my_pkg"]:
            del sys.modules[name]


def jobs(overrides: List[str], multirun: bool, compose) -> Iterator[List[str]]:
    """The override lists to compose for one command: the fixed ones, then once per value of
    each sweep (a preset's sweeper params too), the other sweeps at their first value."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    parsed = parser.parse_overrides(overrides)
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    sweeps = [o for o in parsed if o.is_sweep_override()]
    cfg = compose(fixed)  # a preset may make it a multirun and bring its own sweeps
    given = {o.get_key_element().lstrip("+~") for o in parsed}
    preset = cfg.hydra.sweeper.get("params") or {}
    sweeps += [o for o in parser.parse_overrides([f"{k}={v}" for k, v in preset.items()
                                                  if k not in given]) if o.is_sweep_override()]
    if sweeps and not (multirun or str(cfg.hydra.mode) == "RunMode.MULTIRUN"):
        raise AssertionError(f"sweeps {[o.input_line for o in sweeps]} without -m: Hydra refuses "
                             "a sweep in a single run")
    yield fixed
    firsts = [f"{o.get_key_element()}={next(o.sweep_string_iterator())}" for o in sweeps
              if o.is_discrete_sweep()]  # an interval (Optuna's) is the sweeper's to sample
    for k, o in enumerate(sweeps):
        if o.is_discrete_sweep():
            for value in o.sweep_string_iterator():
                yield [*fixed, *firsts[:k], f"{o.get_key_element()}={value}", *firsts[k + 1:]]


def refusals() -> dict:
    """{where: the `distexp: error: ...` line a page shows right under a command}: documented
    refusals (docs/configuration.md's examples of bad input)."""
    out = {}
    for page in PAGES:
        text = page.read_text()
        raw, prev = text.splitlines(), None
        for n, line in shell_lines(text):
            # right under it: every line from the command's first to this one's is the command
            under = prev is not None and all(raw[k - 1].rstrip().endswith("\\")
                                             for k in range(prev, n - 1))
            if under and line.startswith("distexp: error: "):
                out[f"{page.relative_to(ROOT)}:{prev}"] = line
            prev = n if re.search(r"\bpython3? +-m +distexp\b", line) else None
    return out


REFUSED = refusals()
GPUS = 8  # the faked driver's for a command that asks for GPUs


def _digits(line: str) -> str:
    return re.sub(r"\d+", "N", line)


def distexp_checks(cfg, refusal=None) -> None:
    """distexp.config.checks.validate on a composed job (its hydra node dropped, as the job sees
    it): it passes, or refuses with `refusal` (digits and the home directory aside: the machine's
    cores, memory and user); with a refusal shown, the data's check follows (the job's next);
    a job that asks for GPUs is checked with GPUS of them (a faked driver)."""
    from omegaconf import OmegaConf, open_dict

    from distexp.config import checks, resolved
    from distexp.errors import UserError

    job = OmegaConf.create(OmegaConf.to_container(cfg))
    with open_dict(job):
        job.pop("hydra", None)
    driver, visible = resolved.NVIDIA_GPUS, os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    try:
        if job.get("gpus") and refusal is None:
            resolved.NVIDIA_GPUS = str(fake_driver(Path(tempfile.mkdtemp()), GPUS))
        checks.validate(job)
        if refusal is not None:  # the job process's next check, before any training process
            from distexp.data import loaders

            loaders.check_available(job)
    except UserError as ex:
        said = f"distexp: error: {ex}".replace(str(Path.home()), "~")
        if refusal is None or _digits(said) != _digits(refusal.replace("/root/", "~/")):
            raise AssertionError(f"distexp refuses it: {said}"
                                 + (f" (the page shows: {refusal})" if refusal else "")) from None
        return
    finally:
        resolved.NVIDIA_GPUS = driver
        if visible is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible
    if refusal is not None:
        raise AssertionError(f"the page shows `{refusal}`, but distexp's checks pass it")


def check_distexp(args: List[str], compose, refusal=None) -> int:
    """`python -m distexp ARGS`: Hydra's flags this CLI documents, then overrides that compose
    and pass distexp's checks (or are refused with the line the page shows)."""
    multirun, overrides, it = False, [], iter(args)
    for a in it:
        if a in ("-m", "--multirun"):
            multirun = True
        elif a == "--cfg":
            assert next(it, None) in ("job", "hydra", "all"), "--cfg takes job, hydra or all"
        elif a.startswith("-") and a not in ("--help", "-h", "--hydra-help"):
            raise AssertionError(f"{a}: not a flag python -m distexp takes")
        elif not a.startswith("-"):
            overrides.append(a)
    n = 0
    for job in jobs(overrides, multirun, compose):
        distexp_checks(compose(job), refusal)
        n += 1
    return n


def check_parity(args: List[str], compose) -> int:
    """`python -m distexp.parity ARGS`: its parser, then each strategy's job (strategy=a,b is
    parity's own list: one comparison each)."""
    from distexp import parity

    a = parity._parser().parse_args(args)
    rest = [o for o in a.overrides if o.split("=", 1)[0] != "strategy"]
    names = parity.strategies(a.overrides) or [None]
    for name in names:
        compose([*rest, *([f"strategy={name}"] if name else [])])
    return len(names)


class _Parsed(Exception):
    pass


def check_parsed(main):
    """A module whose main() builds its argparse parser inline: its arguments parse (argparse's
    own error is SystemExit 2), and main stops right there."""
    def check(args: List[str], compose) -> int:
        real = argparse.ArgumentParser.parse_args

        def parse_then_stop(self, argv=None, namespace=None):
            raise _Parsed(real(self, argv, namespace))

        argparse.ArgumentParser.parse_args = parse_then_stop
        try:
            main()(args)
        except _Parsed:
            return 1
        except SystemExit as ex:
            raise AssertionError(f"its parser refuses {args} (exit {ex.code})") from None
        finally:
            argparse.ArgumentParser.parse_args = real
        raise AssertionError("main() returned without parsing its arguments")
    return check


def _report():
    from distexp.report.cli import main
    return main


def _ui():
    from distexp.ui import main
    return main


def _tracking():
    from distexp.tracking.offline import main
    return main


CHECKS = {"distexp": check_distexp, "distexp.parity": check_parity,
          "distexp.report": check_parsed(_report), "distexp.ui": check_parsed(_ui),
          "distexp.tracking": check_parsed(_tracking)}


def test_the_pages_show_commands_of_every_module():
    """The extraction finds what the README shows (a regex that matched nothing would pass every
    test below)."""
    readme = [(m, a) for where, m, a in COMMANDS if where.startswith("README.md:")]
    assert len(readme) >= 20
    assert {m for m, _ in readme} >= {"distexp", "distexp.report", "distexp.ui", "distexp.parity"}
    first_sweep = next(a for m, a in readme if "-m" in a)
    assert "sweep.controls=true" in first_sweep and "repeats=auto" in first_sweep


def outside_fences(text: str) -> str:
    return re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.M | re.S)


def anchors(page: Path) -> set:
    """The anchors GitHub gives the page's headings (lower case, punctuation dropped, spaces to
    hyphens; a repeated heading gets -1, -2, ...)."""
    count: dict = {}
    out = set()
    for m in re.finditer(r"^#{1,6} (.*)$", outside_fences(page.read_text()), flags=re.M):
        base = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = count[base] = count.get(base, -1) + 1
        out.add(f"{base}-{n}" if n else base)
    return out


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_links_and_blocks_hold(page):
    """Every fence is closed (one unclosed fence swallows the rest of the page), and every
    relative link and image names a file that exists and, after #, a heading of that file."""
    text = page.read_text()
    fences = [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"\s*```", line)]
    assert len(fences) % 2 == 0, f"{page.name}: a fence is not closed (fences at {fences})"
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", outside_fences(text)):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and anchor not in anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


@pytest.mark.parametrize("where,module,args", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_command_runs_as_shown(where, module, args, compose):
    line = " ".join(["python -m", module, *args])
    if module not in CHECKS:
        raise AssertionError(f"{where}: `{line}`: no module {module} in distexp")
    try:
        if module == "distexp":
            assert check_distexp(args, compose, REFUSED.get(where)) >= 1
        else:
            assert CHECKS[module](args, compose) >= 1
    except Exception as ex:  # noqa: BLE001  (Hydra's errors name the override)
        first = str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__
        raise AssertionError(f"{where}: `{line}` does not run as shown: {first}") from None


def test_every_extended_test_file_is_in_the_gate_table_and_ci_leaves_them_out():
    """docs/testing.md's gate table says, per behaviour, which tests CI's gate runs and which are
    `extended`: every file with an `extended` test is named there (so a reader knows what the gate
    leaves out), and `.ci/run` deselects them unless given --full."""
    doc = (ROOT / "docs" / "testing.md").read_text()
    table = doc.split("### The gate and `extended`", 1)[1].split("\n### ", 1)[0]
    files = sorted(p.relative_to(ROOT / "tests").as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                   if p.name != Path(__file__).name and "pytest.mark.extended" in p.read_text())
    assert len(files) >= 10, files  # the fault matrices, load, browser, installs, ...
    assert [f for f in files if f"`{f}" not in table] == []
    ci = (ROOT / ".ci" / "run").read_text()
    selects = re.findall(r'-m "([^"]+)"', ci)
    assert selects and all(s.endswith("$EXTRA") for s in selects), selects
    assert 'EXTRA=" and not extended"' in ci and '"--full" ]; then EXTRA=""' in ci
