"""Console lines within WIDTH (120) columns, for every command's output (a leaf: stdlib only).

A path or a command to copy goes on a line of its own; a command longer than a line is cut between
words with a trailing backslash (`command_lines`), so that the shell reads it whole again.
"""
from __future__ import annotations

import shlex
import textwrap

WIDTH = 120  # every console line of distexp's within this many columns (paths on lines of their own)


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
