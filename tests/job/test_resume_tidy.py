"""A sweep keeps only what it needs of checkpoints (distexp.job.resume.tidy, no TensorFlow): once a
sweep's job FINISHED, its own `<job dir>/checkpoints` is removed (a sweep never resumes a finished
job), unless checkpoint.keep_in_sweeps=true; a single run's, an unfinished job's and a
checkpoint.dir the user set stay."""
from __future__ import annotations

from omegaconf import OmegaConf

from distexp.job import resume


def _job(tmp_path, **checkpoint):
    job = tmp_path / "sweep" / "3"
    own = job / "checkpoints"
    own.mkdir(parents=True)
    (own / "ckpt-8.index").write_bytes(b"x")
    cfg = OmegaConf.create({"checkpoint": {"dir": str(own), "keep_in_sweeps": False, **checkpoint}})
    return cfg, job, own


def test_a_finished_sweep_jobs_own_checkpoints_are_removed(tmp_path):
    cfg, job, own = _job(tmp_path)
    assert resume.tidy(cfg, "FINISHED", job, multirun=True)
    assert not own.exists() and job.is_dir()  # the job's logs and result stay


def test_what_a_sweep_does_not_own_or_may_still_need_stays(tmp_path):
    cfg, job, own = _job(tmp_path)
    for status, multirun in (("FAILED", True), ("KILLED", True), ("FINISHED", False)):
        assert not resume.tidy(cfg, status, job, multirun=multirun)
        assert (own / "ckpt-8.index").is_file(), (status, multirun)
    kept = OmegaConf.merge(cfg, {"checkpoint": {"keep_in_sweeps": True}})
    assert not resume.tidy(kept, "FINISHED", job, multirun=True)
    users = tmp_path / "mine"
    users.mkdir()
    (users / "ckpt-8.index").write_bytes(b"x")
    theirs = OmegaConf.merge(cfg, {"checkpoint": {"dir": str(users)}})
    assert not resume.tidy(theirs, "FINISHED", job, multirun=True)
    assert (users / "ckpt-8.index").is_file() and (own / "ckpt-8.index").is_file()
