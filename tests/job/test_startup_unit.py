"""The job process's start-up (distexp.job.startup: the garbage collector while it imports) and
what a sweep does while its first job waits for the warm trainer (distexp.sweeps.ending.
using_the_wait). In this process, no TensorFlow."""
from __future__ import annotations

import gc
import threading
import time

import pytest


@pytest.fixture
def collector():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)
    gc.unfreeze()


def test_the_start_up_collects_seldom_then_freezes_what_it_made(collector, monkeypatch):
    from distexp.job import startup

    monkeypatch.setattr(startup, "_usual", None)
    usual = gc.get_threshold()
    startup.begin()
    assert gc.get_threshold() == startup.START_UP and gc.isenabled()  # seldom, never off
    made = [[i] for i in range(1000)]  # the start-up's objects
    startup.over()
    assert gc.get_threshold() == usual and gc.get_freeze_count() >= len(made)
    frozen = gc.get_freeze_count()
    startup.over()  # once only: a later job of a sweep freezes nothing more
    assert gc.get_freeze_count() == frozen


def test_without_begin_over_changes_nothing(collector, monkeypatch):
    from distexp.job import startup

    monkeypatch.setattr(startup, "_usual", None)
    before = (gc.get_threshold(), gc.get_freeze_count())
    startup.over()
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_a_sweep_preloads_its_end_while_the_first_job_waits(monkeypatch, tmp_path):
    """The preload runs in another thread during the wait and has finished when the wait's block
    ends (never beside a training process); once per sweep; nothing without an open sweep."""
    from distexp.sweeps import ending, publish

    seen = []

    def preload():
        time.sleep(0.2)  # an import that takes a while: the block waits for it
        seen.append(threading.current_thread().name)

    monkeypatch.setattr(publish, "preload", preload)
    sweeps = ending.Sweeps()
    with sweeps.using_the_wait():
        pass
    assert seen == []  # a single job: no sweep end to prepare

    class Run:  # the sweep's parent run, online (an offline sweep makes no summary)
        offline = None

    sweeps.open = ending.OpenSweep(tmp_path, "s", run=Run())
    with sweeps.using_the_wait():
        waited_in = threading.current_thread().name
    assert seen == ["distexp-preload"] and waited_in != seen[0]
    with sweeps.using_the_wait():
        pass
    assert seen == ["distexp-preload"]  # the second job: already done
