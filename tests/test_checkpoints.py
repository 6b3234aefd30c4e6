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
