"""distexp's Hydra sweeper: BasicSweeper + `repeats` (interleaved) + `sweep.resume`.

Hydra loads plugin classes only from the `hydra_plugins` package, so the class is here and the
logic is in distexp.sweeper. Selected by distexp's conf/config.yaml (`hydra/sweeper: distexp`).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, List

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


class DistexpSweeper(BasicSweeper):
    """Hydra's BasicSweeper, each job run `repeats` times round-robin; `sweep.resume` skips
    the jobs that finished in the given sweep and re-runs the failed ones (distexp.sweeper)."""

    def sweep(self, arguments: List[str]) -> Any:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from distexp import sweeper as S

        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        params_conf = self._parse_config() + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params_conf)
        S.check_overrides(overrides)
        jobs = [job for batch in self.split_arguments(overrides, None) for job in batch]
        jobs = S.interleave(jobs, int(OmegaConf.select(self.config, "repeats", default=1) or 1))
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        loader = self.hydra_context.config_loader
        plan = S.plan(jobs, self.config, lambda o: loader.load_sweep_config(self.config, o))
        S.write_records(sweep_dir.absolute(), plan.skipped)
        self.overrides = [[job for _, job in plan.launch]]
        self.batch_index = 1
        returns, first_failure = [], None
        for first_num, batch in S.batches(plan.launch, self.max_batch_size):
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=first_num)
            for r in results:
                if first_failure is None and r.status.name != "COMPLETED":
                    first_failure = r
            returns.append(results)
        if first_failure is not None:  # as BasicSweeper does, but after every job has run
            _ = first_failure.return_value  # raises the job's exception
        return returns
