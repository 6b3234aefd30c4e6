"""Credentials never printed, logged or stored (any process; a leaf: stdlib only).

- ``redact``: a URI with its user-info and secret query parameters (SECRET_PARAM) masked
- ``redact_text`` / ``redact_file``: the same for every URL in a text, a file (Hydra's .hydra/)
- ``RedactingStream``: the job's and sweep's stdout/stderr; ``RedactFilter``: logging handlers
  (Hydra's ``hydra_logging``/``job_logging`` configs ``redacted`` put it on every handler)
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# What counts as a secret: the password of a URI's user-info (user:password@host; the user name
# goes too), and the value of any query parameter whose name contains one of these words
# (case-insensitive): password/passwd/pwd/sslpassword, token/access_token, secret/client_secret,
# key/api_key/apikey/sslkey, credential(s), auth, signature/sig (signed URLs: X-Amz-Signature, sig).
SECRET_PARAM = re.compile(r"pass|pwd|token|secret|key|credential|auth|signature|^sig$", re.I)
MASK = "***"


def redact(uri: str) -> str:
    """The URI with its user-info and any secret query parameter masked, for printing and logging."""
    try:
        parts = urlsplit(uri)
    except ValueError:  # not a URI (e.g. "[" in it): mask anything that looks like a secret
        return redact_text(uri)
    netloc = parts.netloc
    if parts.password is not None or parts.username is not None:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        netloc = f"{MASK}@{host}"
    query = _QUERY_SECRET.sub(_mask_value, parts.query)
    if netloc == parts.netloc and query == parts.query:
        return uri
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# user:password@ after "//" (also Hydra's escaped form, http\://alice\:pw@host, as its launcher
# and .hydra/ files write overrides): everything up to the LAST "@" before a "/" or whitespace
# that a host name follows, so a password holding , ' " [ ] or @ is masked whole; and
# name=value query parameters named like secrets.
_USERINFO = re.compile(r"(?<=//)[^/\s]*@(?=[\w.\-\[])")
_QUERY_SECRET = re.compile(r"(?<![^?&;\s])([A-Za-z0-9_.\-]+)(\\?=)([^&;#\s'\"\]\[,]*)")


def _mask_value(m: "re.Match") -> str:
    name, eq, value = m.group(1), m.group(2), m.group(3)
    return f"{name}{eq}{MASK}" if value and SECRET_PARAM.search(name) else m.group(0)


_URL_QUERY = re.compile(r"(?<=\?)[^\s'\"\[\],]+")


def redact_text(text: str) -> str:
    """`text` with every URL's user:password@ replaced by ***@ and the values of its secret query
    parameters (SECRET_PARAM) by ***."""
    text = _USERINFO.sub(f"{MASK}@", str(text))
    return _URL_QUERY.sub(lambda m: _QUERY_SECRET.sub(_mask_value, m.group(0)), text)


def redact_file(path: Path) -> None:
    """Rewrite a text file (Hydra's .hydra/*.yaml, multirun.yaml) with redact_text applied."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return
    clean = redact_text(text)
    if clean != text:
        tmp = path.with_name(path.name + ".redacting")
        tmp.write_text(clean)
        tmp.replace(path)


class RedactingStream:
    """sys.stdout / sys.stderr of the job and sweep process (distexp.__main__): what anything
    writes there (Hydra's --cfg output, its "Error executing job with overrides" line, a sweeper
    plugin's prints, the trainers' output the job relays) goes out with redact_text applied.
    Everything else (fileno, isatty, buffer, ...) is the wrapped stream's.

    A console that is gone (`| head -1`, `| true`, a closed terminal: EPIPE, as Python ignores
    SIGPIPE) is dropped, not raised: the job goes on and ends as it would have, its logs keep every
    line. The stream's descriptor then points at /dev/null (the recipe of Python's `signal` docs),
    so whoever else holds it (logging handlers, the interpreter's last flush) writes nowhere too."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            self._stream.write(redact_text(text) if ("@" in text or "=" in text) else text)
        except BrokenPipeError:
            self._drop()
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        """The reader is gone: from now on this stream writes to /dev/null."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        except (OSError, ValueError, AttributeError):  # no descriptor (a test's StringIO)
            self._stream = open(os.devnull, "w")
        finally:
            os.close(devnull)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class RedactFilter(logging.Filter):
    """A logging filter (Hydra's hydra_logging / job_logging configs put it on every handler): the
    record's message with redact_text applied, e.g. Hydra's launcher line ``#0 : tracking.uri=...``."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, ()
        return True
