"""The numbers the README and the docs say about the code, kept in step with it: the Python range
(pyproject.toml's requires-python) and the jobs `experiment=scaling` runs (the real sweeper,
its launcher recorded instead of started: helpers.launched). No TensorFlow, no process."""
from __future__ import annotations

import re

from helpers import ROOT, launched

README = (ROOT / "README.md").read_text()


def _python_range() -> str:
    """requires-python ">=3.10,<3.13" as people write it: 3.10-3.12."""
    spec = re.search(r'^requires-python\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(),
                     re.M).group(1)
    low = re.fullmatch(r">=3\.(\d+)", next(p for p in spec.split(",") if p.startswith(">=")))
    high = re.fullmatch(r"<3\.(\d+)", next(p for p in spec.split(",") if p.startswith("<")))
    return f"3.{low.group(1)}-3.{int(high.group(1)) - 1}"


def test_the_readme_says_the_python_versions_the_package_installs_on():
    assert _python_range() == "3.10-3.12"  # pyproject.toml today: the check reads it
    said = re.findall(r"Python (3\.\d+\S*)", README)
    assert said == [f"{_python_range()},"], said  # the set-up line, and no other range


def test_the_scaling_presets_job_count_is_what_it_runs(tmp_path, capsys):
    jobs = launched(tmp_path, preset=["experiment=scaling"])
    controls = [j for j in jobs if any(o.startswith("global_batch_size=") for o in j)]
    n, c = len(jobs), len(controls)
    assert (n, c) == (6, 1)
    readme = re.search(r"experiment=scaling +# .*\((\d+) jobs: (\d+) \+ (\d+) control", README)
    assert readme and tuple(map(int, readme.groups())) == (n, n - c, c), readme
    conf = (ROOT / "docs" / "configuration.md").read_text()
    row = next(ln for ln in conf.splitlines() if ln.startswith("| `scaling` |"))
    assert re.findall(r"(\d+) jobs", row) == [str(n)], row
    sweeps = (ROOT / "docs" / "sweeps.md").read_text()
    said = re.search(r"experiment=scaling repeats=5 +# (\d+) jobs \((\d+) \+ (\d+) control\) x 5",
                     sweeps)
    assert said and tuple(map(int, said.groups())) == (n, n - c, c)
    preset = (ROOT / "distexp" / "conf" / "experiment" / "scaling.yaml").read_text()
    assert f"({n} jobs: {n - c} + {c} control" in preset
