"""A module the warm trainer can fork (tests/job/test_warm.py): `entry(argv)` as distexp.train.trainer
has. argv: what to do, then its argument."""
from __future__ import annotations

import json
import os
import sys
import time


def entry(argv):
    what = argv[0]
    if what == "describe":  # who it is, as the job process sees it
        import gc

        print(json.dumps({"pid": os.getpid(), "sid": os.getsid(0), "cwd": os.getcwd(),
                          "marker": os.environ.get("PROBE_MARKER"), "argv": sys.argv,
                          "gc": gc.isenabled(), "frozen": gc.get_freeze_count()}), flush=True)
        print("to stderr", file=sys.stderr, flush=True)
        return int(argv[1]) if len(argv) > 1 else 0
    if what == "devices":  # the server never started TensorFlow's runtime: devices are ours to set
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        print(len(tf.config.list_logical_devices("CPU")), flush=True)
        return 0
    if what == "sleep":
        print("sleeping", flush=True)
        time.sleep(float(argv[1]))
        return 0
    if what == "raise":
        raise RuntimeError("probe failed on purpose")
    return 9
