"""The kernel's socket table for a job's processes (no TensorFlow here): which of them listen, on
what address, in which network namespace, and whether that is reachable from another machine.

- `listeners(pids)`: every TCP socket in LISTEN state that one of `pids` holds (its inode is among
  the process's file descriptors), read from `/proc/<pid>/net/tcp{,6}` of that process's own
  network namespace, with the interfaces of that namespace (`/proc/<pid>/net/dev`)
- `Listener.reachable`: bound to a non-loopback address, or to a wildcard (0.0.0.0, ::) in a
  namespace with an interface other than `lo`
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import FrozenSet, Iterable, List, Set

LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    pid: int
    netns: str                 # readlink /proc/<pid>/ns/net: net:[inode]
    address: str
    port: int
    interfaces: FrozenSet[str]  # of its namespace

    @property
    def reachable(self) -> bool:
        ip = ipaddress.ip_address(self.address)
        if ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped and ip.ipv4_mapped.is_loopback):
            return False
        return not ip.is_unspecified or bool(self.interfaces - {"lo"})


def _inodes(pid: int) -> Set[str]:
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            found.add(link[len("socket:["):-1])
    return found


def _address(hexaddr: str) -> str:
    """/proc/net/tcp's address: little-endian 32-bit words."""
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listeners(pids: Iterable[int]) -> List[Listener]:
    found = []
    for pid in pids:
        inodes = _inodes(pid)
        try:
            netns = os.readlink(f"/proc/{pid}/ns/net")
            dev = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
            tables = [Path(f"/proc/{pid}/net/{t}").read_text().splitlines()[1:] for t in ("tcp", "tcp6")]
        except OSError:  # the process is gone
            continue
        interfaces = frozenset(line.split(":")[0].strip() for line in dev)
        for line in (row for table in tables for row in table):
            f = line.split()
            if f[3] == LISTEN and f[9] in inodes:
                host, port = f[1].split(":")
                found.append(Listener(pid, netns, _address(host), int(port, 16), interfaces))
    return found
