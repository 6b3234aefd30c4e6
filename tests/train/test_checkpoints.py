"""checkpoint.dir is used by one job at a time (no TensorFlow here)."""
from distexp.train import checkpoints


def test_a_busy_checkpoint_dir_is_not_taken_twice(tmp_path):
    first = checkpoints._take(tmp_path / "ck")
    assert first is not None
    assert checkpoints._take(tmp_path / "ck") is None  # another job holds it
    first.close()  # the holder ends (or dies: the kernel drops the lock)
    again = checkpoints._take(tmp_path / "ck")
    assert again is not None
    again.close()


# -- what a failed or killed save leaves, tidied (distexp.train.checkpoint_files) ---------------

def _touch(d, *names):
    for n in names:
        p = d / n
        if n.endswith("_temp"):
            p.mkdir()
            (p / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"x")
        else:
            p.write_bytes(b"x" * 10)


def test_a_failed_save_removes_what_it_wrote_and_nothing_else(tmp_path):
    """Step 1's leftovers go; ckpt-10 (a prefix match of ckpt-1) and ckpt-5 stay whole."""
    from distexp.train import checkpoint_files as files

    _touch(tmp_path, "ckpt-5.index", "ckpt-5.data-00000-of-00001", "ckpt-10.index",
           "ckpt-10.data-00000-of-00001", "checkpoint", "ckpt-1_temp", "ckpt-1.index",
           "checkpoint.tmp1a2b", "distexp-model.json")
    files.remove_partial(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint", "ckpt-10.data-00000-of-00001", "ckpt-10.index", "ckpt-5.data-00000-of-00001",
        "ckpt-5.index", "distexp-model.json"]
    assert files.size(str(tmp_path / "ckpt-10")) == 20  # index + data, what the next one needs


def test_a_resume_removes_a_killed_saves_temporary_files_and_a_fresh_job_clears(tmp_path):
    from distexp.train import checkpoint_files as files

    _touch(tmp_path, "ckpt-5.index", "ckpt-15_temp", "checkpoint.tmp9", "checkpoint", "notes.txt")
    files.remove_temporary(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "ckpt-5.index", "notes.txt"]
    _touch(tmp_path, "ckpt-20_temp")
    files.clear(tmp_path)  # a directory among the files (unlink() would raise IsADirectoryError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# -- Ctrl-C's line: the checkpoint kept and the command (distexp.job.resume, no TensorFlow) -----

def _state(d, latest, *indexes):
    d.mkdir(exist_ok=True)
    (d / "checkpoint").write_text(f'model_checkpoint_path: "{latest}"\n'
                                  f'all_model_checkpoint_paths: "{latest}"\n')
    for i in indexes:
        (d / f"{i}.index").write_bytes(b"")


def test_the_interrupted_line_names_the_checkpoint_kept_and_the_resume_command(tmp_path):
    from omegaconf import OmegaConf

    from distexp.job import resume

    ck = tmp_path / "ck"
    cfg = OmegaConf.create({"loop": {"name": "custom"},
                            "checkpoint": {"dir": str(ck), "every_steps": None}})
    assert resume.hint(cfg, ["epochs=3"]) == (
        f"; no checkpoint was kept in {ck} (none was written yet): run the same command again to "
        "start over")
    _state(ck, "ckpt-20", "ckpt-20")
    overrides = ["epochs=3", "resume=false", "model.factory=my models:build"]
    assert resume.hint(cfg, overrides) == (
        f"; checkpoint kept: {ck}/ckpt-20 (step 20); continue with: python -m distexp epochs=3 "
        "'model.factory=my models:build' resume=true")
    _state(ck, "ckpt-25", "ckpt-20")  # named, but its index is not there: not kept
    assert resume.kept(ck) is None
    assert resume.hint(OmegaConf.merge(cfg, {"loop": {"name": "fit"}}), overrides) == (
        "; loop=fit keeps no checkpoint: run the same command again to start over")
    assert resume.hint(OmegaConf.merge(cfg, {"checkpoint": {"every_steps": 0}}), overrides) == (
        "; checkpoint.every_steps=0 keeps no checkpoint: run the same command again to start over")
    _state(ck, "ckpt-20", "ckpt-20")
    line = "interrupted: every training process was stopped (logs: j/chief.log)"
    assert resume.stopped_line(line, "KILLED", "SIGTERM", cfg, ["epochs=3"]) == (
        f"interrupted by SIGTERM: every training process was stopped (logs: j/chief.log); "
        f"checkpoint kept: {ck}/ckpt-20 (step 20); continue with: python -m distexp epochs=3 "
        "resume=true")
    assert resume.stopped_line("interrupted while the run was being closed; it ended FINISHED "
                               "(logs: j/chief.log)", "FINISHED", "SIGINT", cfg, []) == (
        "interrupted by SIGINT while the run was being closed; it ended FINISHED (logs: "
        "j/chief.log); the job had finished: its run and figures are kept")
