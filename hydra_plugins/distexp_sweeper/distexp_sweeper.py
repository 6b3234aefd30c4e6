"""distexp's Hydra sweeper: BasicSweeper + `sweep.controls` + `repeats` (interleaved) + `sweep.resume`.

Hydra loads plugin classes only from the `hydra_plugins` package, so the class is here and the
logic is in distexp.sweeps.planning. Selected by distexp's conf (`hydra/sweeper: distexp`, sweeper_default.yaml).
"""
from __future__ import annotations

import contextlib
import copy
import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


def _cached(compose: Callable[[List[str]], Any]) -> Callable[[List[str]], Any]:
    """`compose`, each job's config composed once (a copy each call: callers may edit it)."""
    done: Dict[tuple, Any] = {}

    def cached(overrides: List[str]) -> Any:
        key = tuple(overrides)
        if key not in done:
            done[key] = compose(list(overrides))
        return copy.deepcopy(done[key])

    return cached


@contextlib.contextmanager
def _composed_once(launcher, loader, master, compose):
    """While the jobs launch, Hydra's basic launcher's `load_sweep_config(master, overrides)`
    returns the config this sweeper composed for those overrides (a copy): it would compose each
    job again, ~0.2-0.5 s a job on 2 cores, for the same result. Another master config is composed
    as before; other launchers (joblib pickles the loader to its workers) are left as they are."""
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher

    if not isinstance(launcher, BasicLauncher):
        yield
        return
    own = loader.load_sweep_config

    def load_sweep_config(master_config, sweep_overrides):
        if master_config is master:
            return compose(list(sweep_overrides))
        return own(master_config, sweep_overrides)

    loader.load_sweep_config = load_sweep_config
    try:
        yield
    finally:
        del loader.load_sweep_config  # the class's method again


class DistexpSweeper(BasicSweeper):
    """Hydra's BasicSweeper, each job run `repeats` times round-robin; `sweep.resume` skips
    the jobs that finished in the given sweep and re-runs the failed ones (distexp.sweeps.planning)."""

    def __init__(self, max_batch_size: Optional[int] = None,
                 params: Optional[Dict[str, str]] = None) -> None:
        # BasicSweeper.__init__ calls super(BasicSweeper, self), which breaks when Hydra's plugin
        # scan has re-executed basic_sweeper.py after this class was defined: set up directly.
        Sweeper.__init__(self)
        self.overrides = None
        self.batch_index = 0
        self.max_batch_size = max_batch_size
        self.params = params or {}
        self.hydra_context = self.config = self.launcher = None

    def sweep(self, arguments: List[str]) -> Any:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from distexp.sweeps import planning as S
        from distexp.sweeps import records

        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        params_conf = self._parse_config() + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params_conf)
        jobs = [job for batch in self.split_arguments(overrides, None) for job in batch]
        loader = self.hydra_context.config_loader  # its class's method: see _composed_once
        compose = _cached(lambda o: type(loader).load_sweep_config(loader, self.config, o))
        jobs, merged = S.merge(jobs, compose)
        if merged:
            print(merged, flush=True)
        if S.controls_on(self.config, overrides):
            jobs, lines = S.with_controls(jobs, compose)
            for line in lines:
                print(line, flush=True)
        jobs = S.interleave(jobs, S.repeats(self.config, overrides))
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        from distexp.tracking.store import redact_text

        (sweep_dir / "multirun.yaml").write_text(redact_text(OmegaConf.to_yaml(self.config)))

        plan = S.plan(jobs, self.config, compose)
        S.check_jobs([job for _, job in plan.launch], compose)
        records.write_records(sweep_dir.absolute(), plan.skipped)
        records.write_plan(sweep_dir.absolute(), [num for num, _ in plan.launch])
        self.overrides = [[job for _, job in plan.launch]]
        self.batch_index = 1
        returns, first_failure = [], None
        with _composed_once(self.launcher, self.hydra_context.config_loader, self.config,
                            compose):
            for first_num, batch in S.batches(plan.launch, self.max_batch_size):
                self.validate_batch_is_legal(batch)
                results = self.launcher.launch(batch, initial_job_idx=first_num)
                for r in results:
                    if first_failure is None and r.status.name != "COMPLETED":
                        first_failure = r
                returns.append(results)
        if first_failure is not None:  # as BasicSweeper does, but after every job has run
            # (not via .return_value: it prints the job's overrides, credentials and all)
            raise first_failure._return_value
        return returns
