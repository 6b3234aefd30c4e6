"""User factories for tests (model=custom model.factory=tests.factories:...)."""


def small_mlp(input_shape, num_classes):
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dense(num_classes)])


def explode(input_shape, num_classes):
    raise RuntimeError("factory exploded on purpose")


def crash(input_shape, num_classes):
    """Kills the training process hard (no Python clean-up), as an OOM-kill or segfault would."""
    import os

    os._exit(3)


def hang(input_shape, num_classes):
    import time

    time.sleep(3600)


def kill_tracking_server(input_shape, num_classes):
    """Kills the MLflow server (process group in DISTEXP_TEST_KILL_PGID) mid-job: after the job
    process created the run and logged its params, before the trainer logs anything."""
    import os
    import signal

    os.killpg(int(os.environ["DISTEXP_TEST_KILL_PGID"]), signal.SIGKILL)
    return small_mlp(input_shape, num_classes)
