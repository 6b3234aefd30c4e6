"""Passwords with awkward characters are masked in any text. Tier: unit."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("text, secret", [
    ("tracking.uri=http://alice:S3c,ret@h:5000/", "S3c,ret"),
    ('tracking.uri="http://alice:pa\\"ss@h"', 'pa\\"ss'),
    ("tracking.uri=http://alice:p@ss@host/x", "p@ss"),
    ("#0 : tracking.uri=http\\://alice\\:S3cr[e]t@127.0.0.1\\:5399/ seed=0", "S3cr[e]t"),
    ("http://alice:pa'ss@h/?token=abc&x=1", "pa'ss"),
])
def test_redact_text_masks_passwords_with_awkward_characters(text, secret):
    """A password holding , " ' [ ] or @ is masked whole (the launcher line, .hydra/ files and
    the overrides tag go through redact_text); the host and the rest stay readable."""
    from distexp.tracking.redaction import redact_text

    out = redact_text(text)
    assert secret not in out and "***@" in out, out
    assert "alice" not in out
    assert out.split("***@", 1)[1][:1] in ("h", "1") and "token=***" in redact_text(
        "http://u:p@h/?token=abc") and "x=1" in redact_text("http://h/?token=abc&x=1")
