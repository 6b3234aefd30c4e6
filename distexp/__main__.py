"""`python -m distexp`: compose the config, validate it, launch the training process(es).

This process never imports TensorFlow (so `--help`, `--cfg job` and a bad input answer in well
under a second); training happens in fresh child processes (see distexp.launch).
"""
from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig

from distexp import config  # noqa: F401  (registers the schema and resolvers)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    from distexp.job import run_job

    try:
        return run_job(cfg)
    except config.UserError as ex:  # one line, not Hydra's "Error executing job" report
        print(f"distexp: error: {ex}", file=sys.stderr, flush=True)
        sys.exit(2)


def cli() -> None:
    user_wants_trace = "HYDRA_FULL_ERROR" in os.environ
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us, to print them as one line
    try:
        main()
    except Exception as ex:  # noqa: BLE001
        from distexp.errors import one_line

        msg = one_line(ex)
        if msg is None or user_wants_trace:
            raise
        print(f"distexp: error: {msg}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    cli()
