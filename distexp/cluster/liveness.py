"""Liveness of the tasks of a cluster someone else started (srun, TFJob), from each task's job
process (launch.run polls the watch): a ps server task stops when its coordinator is gone; the
coordinator fails when a server it saw is gone; and no task waits long for a peer that never
started (its job process stopped before TensorFlow: bad input on that node, a missing module).

"Started" is seen from outside TensorFlow: the task's gRPC server accepts a TCP connection. The
start-up bound counts from this task's own server listening (its TensorFlow is up), so a slow
import on a loaded node is not taken for a dead peer; before that, the old bound of OWN_S."""
from __future__ import annotations

import socket
import time
from typing import Dict, Optional

STARTUP_S = 60.0  # a peer not listening this long after this task's own server: it never
#                   started (cluster.peer_start_timeout)
OWN_S = 600.0     # ... and this long after the job process started, whatever this task's state


def listening(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


class Startup:
    """The start-up clock: None until `own` (this task's address) is first seen listening."""

    def __init__(self, own: Optional[str], startup_s: float = STARTUP_S, own_s: float = OWN_S):
        self.own, self.startup_s, self.own_s = own, startup_s, own_s
        self.t0, self.own_t = time.monotonic(), None

    def over(self, now: float) -> bool:
        """Whether a peer not seen by `now` has had its time."""
        if self.own_t is None and self.own is not None and listening(self.own):
            self.own_t = now
        if self.own_t is not None:
            return now - self.own_t > self.startup_s
        return now - self.t0 > self.own_s

    def waited(self) -> str:
        if self.own_t is not None:
            return f"{self.startup_s:g} s after this task's own server ({self.own}) did"
        return f"{self.own_s:g} s"


class ChiefWatch:
    """For a ps worker/ps server task that someone else started (srun, TFJob): true once the job is
    over. Such a server never exits by itself (Server.join()) and under Slurm nobody stops it, so
    the task's job process watches the chief (the coordinator) listen on its gRPC address: seen
    listening, then refused twice in a row = the coordinator exited (finished or failed) -> stop
    the server, exit 0 (the chief's task carries the job's outcome). Never seen in time (Startup)
    = the coordinator never started: a failure naming it, not a hang."""

    EVERY_S = 1.0

    def __init__(self, address: str, own: Optional[str] = None, name: str = "the coordinator (chief)",
                 startup: Optional[Startup] = None):
        self.address, self.name = address, name
        self.startup = startup or Startup(own)
        self.seen, self.misses, self.next = False, 0, 0.0

    def listening(self) -> bool:
        return listening(self.address)

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
        if self.startup.over(now):
            raise TimeoutError(f"{self.name} never listened on {self.address}, "
                               f"{self.startup.waited()}: its task stopped before TensorFlow "
                               "started (see that task's output)")
        return False


class PeerLost(RuntimeError):
    """A server task of the job went away while the coordinator trained."""


class ServerWatch:
    """For the coordinator of a ps cluster someone else started: a worker or ps server seen
    listening that then refuses connections twice in a row has died (its task was killed or
    failed). TensorFlow's coordinator would carry on with the other workers (its fault tolerance
    waits for a restart nobody does here) and the figures would mix cluster sizes: the job fails,
    naming the server, as it does on a local cluster. With `lost=False` (multiworker, whose
    peers may exit first when they are done: TensorFlow's heartbeats see a peer lost while
    training) only a peer that never started fails the job."""

    def __init__(self, servers: Dict[str, str], own: Optional[str] = None, lost: bool = True,
                 startup: Optional[Startup] = None):
        startup = startup or Startup(own)
        self.lost = lost
        self.watches = {name: ChiefWatch(addr, name=name, startup=startup)
                        for name, addr in servers.items()}

    def lost_now(self) -> Optional[str]:
        """Asked when a stop signal comes (distexp.job.launch): a peer seen listening that does not
        answer now (one connection each, at once), as the one line naming its task and node; None
        when every peer seen answers. A scheduler that kills the job's step because a node or its
        link was lost sends the signal after the loss: the failure, not the signal, is the job's
        outcome."""
        for name, w in self.watches.items():
            if w.seen and not w.listening():
                host = w.address.rpartition(":")[0]
                return (f"{name} on node {host} stopped answering ({w.address}) while the job "
                        "trained: its node or its link was lost")
        return None

    def __call__(self) -> bool:
        for name, w in self.watches.items():
            if w() and self.lost:
                raise PeerLost(f"{name} stopped answering at {w.address}: its task ended while "
                               "the job was still running")
        return False
