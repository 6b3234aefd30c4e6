"""distexp's Ray launcher (`hydra/launcher=ray`): hydra-ray-launcher's RayLauncher with
distexp.cluster.ray_sweep's launch (each job a Ray task with the resources it needs). Hydra accepts
launchers only from the hydra_plugins package: the class lives here, the logic there, the defaults
in conf/hydra/launcher/ray.yaml. Without the `ray` extra nothing is defined (distexp.extras refuses
`hydra/launcher=ray` in one line first)."""
import warnings

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class QuietRaySchema(SearchPathPlugin):
    """conf/hydra/launcher/ray.yaml is checked against the Ray plugin's own schema of that name
    (RayConf): wanted, and said by Hydra in a deprecation warning on every sweep. Silenced here:
    Hydra asks search-path plugins just before it composes (a filter set at import is undone,
    Hydra imports plugins inside warnings.catch_warnings); nothing is added to the path."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/ray' is validated against "
                                "ConfigStore")


try:
    from hydra_plugins.hydra_ray_launcher.ray_launcher import RayLauncher as _Ray
except ImportError:  # the extra is not installed
    _Ray = None

if _Ray is not None:
    class DistexpRayLauncher(_Ray):
        """hydra-ray-launcher's RayLauncher, joining a running cluster as well as starting one."""

        # its jobs run on the Ray cluster's nodes, which give them their GPUs
        # (distexp.sweeps.launchers)
        places_jobs_elsewhere = True
        # the Ray it started (or joined) is stopped by the interpreter's teardown, at exit
        exits_through_teardown = True

        def launch(self, job_overrides, initial_job_idx):
            from distexp.cluster import ray_sweep

            return ray_sweep.launch(self, job_overrides, initial_job_idx)
