"""Liveness of the tasks of a ps cluster someone else started (srun, TFJob): a server task stops
when its coordinator is gone; the coordinator fails when a server it saw is gone."""
from __future__ import annotations

import socket
import time
from typing import Dict


class ChiefWatch:
    """For a ps worker/ps server task that someone else started (srun, TFJob): true once the job is
    over. Such a server never exits by itself (Server.join()) and under Slurm nobody stops it, so
    the task's job process watches the chief (the coordinator) listen on its gRPC address: seen
    listening, then refused twice in a row = the coordinator exited (finished or failed) -> stop
    the server, exit 0 (the chief's task carries the job's outcome). Never seen within
    `startup_s` = the coordinator never started: a failure, not a hang."""

    STARTUP_S, EVERY_S = 600.0, 1.0

    def __init__(self, address: str, startup_s: float = STARTUP_S):
        host, _, port = address.rpartition(":")
        self.address, self.host, self.port = address, host, int(port)
        self.startup_s, self.t0 = startup_s, time.monotonic()
        self.seen, self.misses, self.next = False, 0, 0.0

    def listening(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=2):
                return True
        except OSError:
            return False

    def __call__(self) -> bool:
        now = time.monotonic()
        if now < self.next:
            return False
        self.next = now + self.EVERY_S
        if self.listening():
            self.seen, self.misses = True, 0
            return False
        if self.seen:
            self.misses += 1
            return self.misses >= 2
        if now - self.t0 > self.startup_s:
            raise TimeoutError(f"the coordinator (chief) never listened on {self.address} in "
                               f"{self.startup_s:g} s")
        return False

class PeerLost(RuntimeError):
    """A server task of the job went away while the coordinator trained."""

class ServerWatch:
    """For the coordinator of a ps cluster someone else started: a worker or ps server seen
    listening that then refuses connections twice in a row has died (its task was killed or
    failed). TensorFlow's coordinator would carry on with the other workers (its fault tolerance
    waits for a restart nobody does here) and the figures would mix cluster sizes: the job fails,
    naming the server, as it does on a local cluster."""

    def __init__(self, servers: Dict[str, str]):
        self.watches = {name: ChiefWatch(addr, startup_s=float("inf"))
                        for name, addr in servers.items()}

    def __call__(self) -> bool:
        for name, w in self.watches.items():
            if w():
                raise PeerLost(f"{name} stopped answering at {w.address}: its task ended while "
                               "the job was still running")
        return False
