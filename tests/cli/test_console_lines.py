"""Console lines within 120 columns (distexp.console_lines): a command to copy cut between words
with a backslash, a line of prose cut between words, a path kept whole."""
from __future__ import annotations


def test_a_command_is_cut_between_words_and_the_shell_joins_it_again():
    import shlex

    from distexp.console_lines import command_lines

    words = ["python", "-m", "distexp", "-m", "model.name=a b", *[f"key{i}=value{i}" for i in range(30)]]
    cmd = shlex.join(words)
    lines = command_lines(cmd).splitlines()
    assert len(lines) > 3 and max(len(ln) for ln in lines) <= 120
    assert all(ln.endswith(" \\") for ln in lines[:-1]) and lines[0].startswith("  python -m")
    assert shlex.split(" ".join(ln.removesuffix(" \\") for ln in lines)) == words  # as bash reads it


def test_a_long_line_of_prose_is_cut_between_words():
    """distexp.console_lines.fit, as a job's closing lines use it (the step split's line was 149)."""
    from distexp.console_lines import fit

    line = ("step 3.17 ms = input 0.59 + compute 0.91 + sync 0.00 + other 1.67; bottleneck: other, "
            "53 % (unattributed: host, dispatch, what the probes do not see)")
    assert fit(line).splitlines() == [
        "step 3.17 ms = input 0.59 + compute 0.91 + sync 0.00 + other 1.67; bottleneck: other, 53 % "
        "(unattributed: host,", "  dispatch, what the probes do not see)"]
    assert fit("short line") == "short line"
    path = "/x" * 80
    assert fit(f"Job directory: {path}") == f"Job directory:\n  {path}"  # a path stays whole


def test_a_lines_kind_is_its_prefix_and_reads_back():
    """The kinds written and read through one module (distexp.console_lines), as the job reads a
    trainer's error line back (distexp.job.launch) and hides its detail lines."""
    from distexp import console_lines as c
    from distexp.job import launch

    assert c.error("tracking: x") == "distexp: error: tracking: x"
    assert c.warning("w") == "distexp: warning: w" and c.detail("d") == "distexp: detail: d"
    assert [c.kind_of(s) for s in (c.error("a"), c.warning("b"), c.detail("c"), "distexp: error:",
                                   "distexp: interrupted by SIGINT", "error: x", "")] == \
        ["error", "warning", "detail", "error", None, None, None]
    assert c.text_of(c.error(" model.factory: bad ")) == "model.factory: bad"
    assert c.text_of("plain line") == "plain line"
    assert launch._last_error(["Traceback", c.error("dataset.name: received 'x'"), "after"]) == \
        ": dataset.name: received 'x'"
    assert launch.console_line(c.error("said by the job"), set()) is None
    assert launch.console_line(c.detail("log only"), set()) is None
    assert launch.console_line(c.warning("shown") + "\n", set()) == c.warning("shown") + "\n"
