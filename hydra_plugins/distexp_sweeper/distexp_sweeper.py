"""distexp's Hydra sweeper: BasicSweeper + `sweep.controls` + `repeats` (interleaved) + `sweep.resume`.

Hydra loads plugin classes only from the `hydra_plugins` package, so the class is here, with
Hydra's glue only: the overrides parsed, the sweep opened (its callback), the jobs launched in
batches. The sweep, its set-ups and its one round loop are distexp.sweeps.sweep.Sweep's (planning:
distexp.sweeps.planning). Selected by distexp's conf (`hydra/sweeper: distexp`, sweeper_default.yaml).
"""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


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
    the jobs that finished in the given sweep and re-runs the failed ones (distexp.sweeps.sweep)."""

    opens_sweep = True  # distexp.sweeps.callback: once every job has passed its checks (`_open`)

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
        """Every check of every job first (nothing is written, no parent run opened, before they
        pass: distexp.sweeps.callback.open_sweep), then the rounds (distexp.sweeps.sweep)."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from distexp.sweeps.sweep import Sweep

        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        # ${now:...} in the sweep dir resolved before any job is composed (Hydra copies the
        # master's resolver cache into each job's config): every job in the one sweep folder
        str(self.config.hydra.sweep.dir)
        params_conf = self._parse_config() + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params_conf)
        jobs = [job for batch in self.split_arguments(overrides, None) for job in batch]
        loader = self.hydra_context.config_loader  # its class's method: see _composed_once
        sweep = Sweep(self.config, lambda o: type(loader).load_sweep_config(loader, self.config, o))
        lines = sweep.plan(jobs, overrides)
        opened = self._open(lines)
        returns: List[Any] = []
        with _composed_once(self.launcher, loader, self.config, sweep.compose):
            first_failure = sweep.run(opened, lambda launch: self._launch(launch, returns))
        if first_failure is not None:  # as BasicSweeper does, but after every job has run
            # (not via .return_value: it prints the job's overrides, credentials and all)
            raise first_failure._return_value
        return returns

    def _open(self, lines: List[str]):
        """The checks passed: open the sweep (its parent run, sweep.json: the sweep callback's,
        when installed; its OpenSweep, else None), write multirun.yaml."""
        from distexp.sweeps import callback
        from distexp.tracking.redaction import redact_text

        opened = None
        hooks = getattr(self.hydra_context.callbacks, "callbacks", None) or []
        if any(isinstance(h, callback.SweepCallback) for h in hooks):  # it deferred to here
            callback.probe_store(self.config)
            opened = callback.open_sweep(self.config)
        for line in lines:
            print(line, flush=True)
        sweep_dir = Path(self.config.hydra.sweep.dir).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / "multirun.yaml").write_text(redact_text(OmegaConf.to_yaml(self.config)))
        return opened

    def _launch(self, launch, returns: List[Any]):
        """Launch (num, overrides) jobs in batches of consecutive numbers; the first failure."""
        from distexp.sweeps import planning

        first_failure = None
        for first_num, batch in planning.batches(launch, self.max_batch_size):
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=first_num)
            for r in results:
                if first_failure is None and r.status.name != "COMPLETED":
                    first_failure = r
            returns.append(results)
        return first_failure
