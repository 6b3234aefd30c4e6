"""distexp: configurable experiments with TensorFlow distribution strategies, tracked in MLflow."""
__version__ = "0.1.0"


def _sweeper_plugin_reachable() -> None:
    """Hydra loads distexp's sweeper from `hydra_plugins/distexp_sweeper`, a sibling of this
    package. A wheel installs both side by side; an editable install maps `distexp` only, so an
    environment installed before the plugin existed would fail every sweep ("IS THE PLUGIN
    INSTALLED?"): put the source tree on the end of sys.path then."""
    import importlib.util
    import os
    import sys

    try:
        if importlib.util.find_spec("hydra_plugins.distexp_sweeper") is not None:
            return
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if os.path.isdir(os.path.join(root, "hydra_plugins", "distexp_sweeper")) and root not in sys.path:
        sys.path.append(root)


_sweeper_plugin_reachable()
