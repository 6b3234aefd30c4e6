"""The skips of a test session, by reason, and the ones a CI machine does not allow (tests/conftest.py
collects them; `.ci/run` sets ALLOWED to the reasons its gate machine may skip for: no GPU, no
TPU). A gate test that skips because the machine lacks root, Debian, PostgreSQL, Chromium or a
tmpfs fails CI instead of passing quietly."""
from __future__ import annotations

import os
from collections import Counter
from typing import List, Sequence, Tuple

ALLOWED = "DISTEXP_SKIPS_ALLOWED"  # ';'-separated: the start of each reason a skip may give


def reason(longrepr) -> str:
    """A skip report's reason: pytest's (path, line, "Skipped: <reason>") for a skip, its text
    otherwise."""
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def by_reason(skips: Sequence[Tuple[str, str]]) -> List[Tuple[int, str]]:
    """(count, reason) of (test id, reason) pairs, the most frequent first."""
    return [(n, r) for r, n in Counter(r for _, r in skips).most_common()]


def refused(skips: Sequence[Tuple[str, str]], allowed=None) -> List[Tuple[str, str]]:
    """The (test id, reason) skips whose reason starts with none of the allowed ones; none when
    nothing is set (a developer's run: skips are printed, not refused)."""
    allowed = os.environ.get(ALLOWED) if allowed is None else allowed
    if allowed is None:
        return []
    starts = tuple(a.strip() for a in allowed.split(";") if a.strip())
    return [(t, r) for t, r in skips if not (starts and r.startswith(starts))]
