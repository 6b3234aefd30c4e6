"""gpu_replicas' memory limits (distexp.train.devices): each logical GPU gets an equal share of
its physical GPU's memory, read from nvidia-smi (a fake one here) before TensorFlow starts."""
from __future__ import annotations

import os
import stat

import pytest

from distexp import errors
from distexp.train import devices

pytestmark = pytest.mark.integration  # starts a (fake) nvidia-smi


def _fake_nvidia_smi(tmp_path, monkeypatch, body: str):
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{path.parent}{os.pathsep}{os.environ['PATH']}")
    return path


def test_each_logical_gpu_gets_an_equal_share_of_the_gpus_memory(tmp_path, monkeypatch):
    """nvidia-smi asked for the visible GPU's memory (its id from CUDA_VISIBLE_DEVICES); 90 % of
    it shared out: an H200's 143771 MiB over 2 logical GPUs: 64696 MiB each."""
    _fake_nvidia_smi(tmp_path, monkeypatch, 'echo "$@" > "$(dirname "$0")/args"; echo 143771')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert devices.gpu_memory_mb(1) == 143771
    assert (tmp_path / "bin" / "args").read_text().split()[-2:] == ["-i", "5"]
    assert devices.logical_gpu_mb(143771, 2) == 64696
    assert devices.logical_gpu_mb(143771, 3) == 43131


def test_no_memory_figure_is_one_line(tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path, monkeypatch, "echo 'No devices were found' >&2; exit 6")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(errors.UserError) as ex:
        devices.gpu_memory_mb(0)
    assert str(ex.value).startswith("gpu_replicas: could not read GPU 0's memory with "
                                    "nvidia-smi (CalledProcessError")
    assert str(ex.value).endswith("each logical GPU needs a memory limit: use gpu_replicas=1")
