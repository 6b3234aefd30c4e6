"""Train one job in this process and watch its measurement window (distexp.train.window).

`python window_probe.py <job_dir> key=value ...` composes the config, trains with
distexp.train.trainer.train and prints JSON: the window's steps, whether the model's and
optimizer's variables changed while it ran (it trains: they must), whether they are back to
training's values when it returned, and a digest of every variable after train() returned (two
jobs that trained the same carry the same digest). Run in a subprocess: TensorFlow's devices are
fixed once per process.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

import distexp
from distexp.config import schema
from distexp.train import trainer, window

CONF = Path(distexp.__file__).resolve().parent / "conf"
schema.register()


def values(ctx):
    return [v.numpy().tobytes() for v in list(ctx.model.variables) + list(ctx.optimizer.variables)]


def main() -> None:
    job_dir = Path(sys.argv[1])
    job_dir.mkdir(parents=True, exist_ok=True)
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="config", overrides=sys.argv[2:] + ["tracking.enabled=false"])
    seen = {}
    real_extend, real_run = window.extend, window._run

    def extend(ctx, dispatch):
        seen["before"] = values(ctx)
        out = real_extend(ctx, dispatch)
        seen["after"] = values(ctx)
        return out

    def run(reporter, dispatch, n):
        real_run(reporter, dispatch, n)
        seen["during"] = values(seen["ctx"])

    def capture(ctx, dispatch):
        seen["ctx"] = ctx
        return extend(ctx, dispatch)

    window.extend, window._run = capture, run
    final = trainer.train(cfg, job_dir)
    ctx = trainer._FINISHED[-1][0]
    digest = hashlib.sha256(b"".join(values(ctx))).hexdigest()
    print(json.dumps({"window_steps": final["window_steps"],
                      "changed": "during" in seen and seen["during"] != seen["before"],
                      "restored": seen["after"] == seen["before"], "digest": digest,
                      "final": final}))


if __name__ == "__main__":
    main()
