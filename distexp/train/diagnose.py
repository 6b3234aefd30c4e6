"""An exception from inside training, as the one line the user reads (the trainer's last word).

`explain(ex, cfg)` returns the exception to raise instead (`raise explain(ex, cfg) from ex`, so the
traceback stays attached for the process's log):
- a known TensorFlow error about the data (a label outside the classes, found by the sparse
  cross-entropy on CPU or by the range check distexp.tasks.preflight maps over a tf.data
  pipeline) -> UserError naming the key and the label received;
- an error raised from a user's own code (a frame, or TensorFlow's "defined at" stack, in the
  module of model.factory, dataset.factory or task.factory) -> UserError naming that factory,
  the exception's own first line and where;
- anything else -> UserFailure with the exception's type and its own first line (never the last
  line of the log, which is often TensorFlow's node name or Keras' argument list).
"""
from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path
from typing import List, Optional, Tuple

from distexp.errors import UserError, UserFailure, first_line
from distexp.options import datasets, models
from distexp.tasks import preflight

_TF_RANGE = re.compile(r"Received a label value of (-?\d+) which is outside the valid range of "
                       r"\[0, (\d+)\)")
_PIPELINE = re.compile(r"Error in user-defined function passed to \w+")
_OUR_RANGE = re.compile(re.escape(preflight.RANGE_MARK) + r" \(num_classes=(\d+)\):\] \[(-?\d+)")


def explain(ex: BaseException, cfg) -> Exception:
    text = str(ex)
    m = _TF_RANGE.search(text)
    if m:
        return UserError(preflight.range_line(cfg, int(m.group(1)), int(m.group(2))))
    m = _OUR_RANGE.search(text)
    if m:
        return UserError(preflight.range_line(cfg, int(m.group(2)), int(m.group(1))))
    what = f"{type(ex).__name__}: {first_line(ex)}"
    found = _user_frame(ex, text, _factories(cfg))
    if found is not None:
        key, spec, where = found
        return UserError(f"{key}: {spec} failed in training: {what} (at {where})")
    if _PIPELINE.search(text) and datasets.of(cfg).factory:  # the user's tf.data functions
        return UserError(f"dataset.factory: {cfg.dataset.factory} failed in its tf.data pipeline: "
                         f"{what}")
    return UserFailure(what)


def _factories(cfg) -> List[Tuple[str, str, str]]:
    """(key, spec, source file) of each user factory of the job whose module is loaded."""
    out = []
    for key, node, on in (("model.factory", cfg.model, models.of(cfg).factory),
                          ("dataset.factory", cfg.dataset, datasets.of(cfg).factory),
                          ("task.factory", cfg.get("task") or {}, True)):
        spec = node.get("factory") if on else None
        module = sys.modules.get(str(spec).partition(":")[0]) if spec else None
        if getattr(module, "__file__", None):
            out.append((key, str(spec), str(Path(module.__file__).resolve())))
    return out


def _user_frame(ex: BaseException, text: str, factories) -> Optional[Tuple[str, str, str]]:
    """The factory whose module appears last in the exception's stack (or in TensorFlow's stack
    of the failed op, which its message carries), with "file:line"."""
    if not factories:
        return None
    frames = [(str(Path(f.filename).resolve()), f.lineno) for f in traceback.extract_tb(
        ex.__traceback__)]
    frames += [(str(Path(f).resolve()), int(n)) for f, n in
               re.findall(r'File "([^"]+)", line (\d+)', text)]
    for path, line in reversed(frames):
        for key, spec, source in factories:
            if path == source:
                return key, spec, f"{Path(path).name}:{line}"
    return None
