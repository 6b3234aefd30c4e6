"""Built-ins picked by name: the one way distexp registers them (Lightning's StrategyRegistry is
the model). A registry maps a name to a record instance (strategies, cluster kinds: `add` a class
with a `name`; models, datasets, loops, optimizers, tasks: `put` a distexp.options record); `find`
is the one line for a name it does not know, and `load` first imports the module a config node
names as its `record` (an option of one's own, outside distexp). A leaf: no TensorFlow, nothing of
distexp but errors."""
from __future__ import annotations

import importlib
from typing import Optional, Tuple

from distexp.errors import UserError


class Registry(dict):
    def __init__(self, key: str, *, sort: bool = False, base: str = ""):
        """`key`: the config key that names an entry (`strategy`, `cluster`, `model`); `sort`:
        list the valid names sorted (else in registration order); `base`: what a `record` module
        must register (for its one line)."""
        super().__init__()
        self.key, self.sort, self.base = key, sort, base

    def add(self, cls):
        """Class decorator: register an instance of `cls` under `cls.name`."""
        self[cls.name] = cls()
        return cls

    def put(self, record):
        """Register a record instance under its `name` (returned, so a module can keep it)."""
        self[record.name] = record
        return record

    def names(self) -> Tuple[str, ...]:
        return tuple(sorted(self) if self.sort else self)

    def find(self, name: str):
        try:
            return self[name]
        except KeyError:
            from distexp.errors import did_you_mean

            raise UserError(f"{self.key}: received {name!r}{did_you_mean(name, self.names())}; "
                            f"valid: {', '.join(self.names())}") from None

    def load(self, name: str, record: Optional[str]):
        """The entry `name`; `record` (a module path), when `name` is not known yet, is imported
        first, so an entry defined outside distexp registers itself."""
        if record and name not in self:
            try:
                importlib.import_module(str(record))
            except ImportError as ex:
                raise UserError(f"{self.key}.record: received {record!r}, which cannot be "
                                f"imported ({ex}); valid: an importable module that registers "
                                f"a {self.base}") from None
        return self.find(name)
