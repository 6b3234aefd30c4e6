"""What a sweep's Hydra launcher declares about itself, asked of its class (no TensorFlow here).

- `places_jobs_elsewhere`: its jobs run on other machines, which give them their GPUs (distexp's
  Ray launcher declares it; distexp.sweeps.gpu_pool then holds none).
- `exits_through_teardown`: the command must end through the interpreter's teardown, not
  distexp.errors.exit_now, because the launcher left something the teardown winds down (a Ray the
  sweep started; joblib's worker processes and shared memory). distexp's Ray launcher declares it.

A launcher that does not say is known by its class's name: submitit's `SlurmLauncher` (distexp's
hydra/launcher=slurm is one) places jobs elsewhere; Hydra's `JoblibLauncher` exits through the
teardown.
"""
from __future__ import annotations

UNSAID = {"places_jobs_elsewhere": "SlurmLauncher", "exits_through_teardown": "JoblibLauncher"}


def _declares(target: str, what: str) -> bool:
    from hydra.utils import get_class

    try:
        cls = get_class(target) if target else None
    except (ImportError, ValueError, AttributeError):
        return False
    said = getattr(cls, what, None)
    if said is not None:
        return bool(said)
    return any(c.__name__ == UNSAID[what] for c in getattr(cls, "__mro__", ()))


def places_jobs_elsewhere(target: str) -> bool:
    """Whether the launcher `target` (its `_target_`) runs the sweep's jobs on other machines."""
    return _declares(target, "places_jobs_elsewhere")


def exits_through_teardown(target: str) -> bool:
    """Whether a command whose sweep ran on the launcher `target` ends through the teardown."""
    return _declares(target, "exits_through_teardown")
