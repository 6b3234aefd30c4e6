"""`python benchmarks/cpu.py --smoke`: the issue-49 CPU comparison (the default job against the
hand-written loop, first step stamped from outside) runs end to end and answers in its table, at
1 round and 2 epochs. Marked bench (left out of CI's gate: `python -m pytest -m bench`). Its
arithmetic: tests/benchmarks/test_cpu_bench.py."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers import ROOT, child_env

pytestmark = [pytest.mark.slow, pytest.mark.bench]


def test_the_smoke_run_answers_in_its_table(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cpu.py"), "--smoke"],
                       cwd=tmp_path, env=child_env(tests=False), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    row = re.search(r"^\| 1 \| ([\d.]+) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+)x \| (\d+) \| ([\d.]+) \| "
                    r"([\d.]+) \| ([+-][\d.]+) \|$", r.stdout, re.M)
    assert row, r.stdout
    distexp, hand = (float(row[i].replace(",", "")) for i in (2, 3))
    assert distexp > 0 and hand > 0
    assert float(row[4]) == pytest.approx(distexp / hand, abs=0.006)
    assert float(row[8]) == pytest.approx(float(row[6]) - float(row[7]), abs=0.006)
    assert "## cpu_replicas=1" in r.stdout and "## cpu_replicas=2" not in r.stdout
    assert re.search(r"^median ratio [\d.]+x \(goal >= 1\.4x: (met|NOT met)\)", r.stdout, re.M)
