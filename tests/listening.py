"""The TCP sockets a process and its descendants listen on, read from ``/proc`` (Linux).

``/proc/net/tcp`` and ``tcp6`` list the listening sockets of the network namespace by
inode; ``/proc/PID/fd`` says which process holds which inode.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

_LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp


@dataclass(frozen=True)
class Listener:
    """A listening socket: its address and port, and the process holding it."""

    address: str
    port: int
    pid: int
    command: str

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach it (127.0.0.0/8, ::1, or either mapped)."""
        ip = ipaddress.ip_address(self.address)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return ip.is_loopback


def _sockets() -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket."""
    found = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != _LISTEN:
                continue
            hex_address, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_address)  # 32-bit words in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found[int(fields[9])] = (socket.inet_ntop(family, raw), int(hex_port, 16))
    return found


def processes() -> dict[int, tuple[int, str]]:
    """Every process on this machine: pid -> (parent pid, start time), from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # gone meanwhile
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # after the command's name
            found[int(entry.name)] = (int(fields[1]), fields[19])
    return found


def process_tree(root: int) -> list[int]:
    """``root`` and the processes descended from it, now."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in processes().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def listeners(root: int) -> set[Listener]:
    """The TCP sockets ``root`` and its descendants listen on."""
    sockets, found = _sockets(), set()
    for pid in process_tree(root):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in sockets:
                address, port = sockets[int(target[8:-1])]
                found.add(Listener(address, port, pid, command.decode(errors="replace")[:160]))
    return found
