"""Console lines within WIDTH (120) columns, for every command's output, and their kinds (a leaf:
stdlib only).

A line's kind is its prefix, spelt here only (tests/project/test_vocabularies.py): `error` (one
line, what went wrong: the job process reads a trainer's back, `kind_of`), `warning`, and `detail`
(for the process's log only: the console does not show it, distexp.job.launch).

A path or a command to copy goes on a line of its own; a command longer than a line is cut between
words with a trailing backslash (`command_lines`), so that the shell reads it whole again.
"""
from __future__ import annotations

import shlex
import textwrap
from typing import Optional

WIDTH = 120  # every console line of distexp's within this many columns (paths on lines of their own)

ERROR = "distexp: error: "
WARNING = "distexp: warning: "
DETAIL = "distexp: detail: "
KINDS = {"error": ERROR, "warning": WARNING, "detail": DETAIL}


def error(text: str) -> str:
    return ERROR + text


def warning(text: str) -> str:
    return WARNING + text


def detail(text: str) -> str:
    return DETAIL + text


def kind_of(line: str) -> Optional[str]:
    """"error", "warning" or "detail" for a line of that kind (its prefix; the space after the
    colon may be cut, as at a line's end), else None."""
    return next((k for k, p in KINDS.items() if line.startswith(p.rstrip())), None)


def text_of(line: str) -> str:
    """A line of a kind without its prefix (a line of none: as it is)."""
    kind = kind_of(line)
    return line[len(KINDS[kind].rstrip()):].strip() if kind else line


def command_lines(command: str, indent: str = "  ", width: int = WIDTH) -> str:
    """A shell command to copy, on lines of at most `width` columns where its words allow: broken
    between words with a trailing backslash (the shell joins them again), continued lines
    indented two more columns; a word longer than a line stays whole."""
    lines, line = [], indent
    for word in (shlex.quote(w) for w in shlex.split(command)):
        if line.strip() and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = indent + "  " + word
        else:
            line = f"{line} {word}" if line.strip() else line + word
    return "\n".join(lines + [line])


def fit(line: str, width: int = WIDTH) -> str:
    """A line of prose within `width` columns: cut between words where longer, the rest indented
    two columns; a word longer than a line (a path) stays whole."""
    if len(line) <= width:
        return line
    return textwrap.fill(line, width, subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)
