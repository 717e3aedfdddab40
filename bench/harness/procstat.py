"""What a process holds, from the kernel's documented per-process files (proc(5)): resident memory and threads
from ``/proc/PID/status`` (``VmRSS``, ``Threads``), open file descriptors as the entries of ``/proc/PID/fd``,
the parent and the CPU time used (``utime`` + ``stime``) from ``/proc/PID/stat``, the command line from
``/proc/PID/cmdline``, and the machine's busy CPU time from ``/proc/stat``. A process that is gone
(or not ours to read) is ``None``, never an error: the long run samples processes it is killing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
#: the unit of /proc's CPU times (proc(5): clock ticks, ``sysconf(_SC_CLK_TCK)``)
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    """One process (or a sum over processes: ``processes`` > 1) at one moment."""

    rss_kib: int
    threads: int
    fds: int
    processes: int = 1

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.rss_kib + other.rss_kib,
            self.threads + other.threads,
            self.fds + other.fds,
            self.processes + other.processes,
        )


NOTHING = Usage(0, 0, 0, 0)


def usage(pid: int) -> Usage | None:
    """``pid``'s resident memory, threads and open file descriptors now; ``None`` when it is gone."""
    try:
        rss = threads = -1
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        fds = len(os.listdir(PROC / str(pid) / "fd"))
    except (OSError, ValueError, IndexError):
        return None
    if threads < 0:
        return None
    # a zombie has no VmRSS line: nothing resident
    return Usage(max(rss, 0), threads, fds)


def total(pids: Iterable[int]) -> Usage:
    """The sum over ``pids`` of what each still running holds."""
    out = NOTHING
    for pid in pids:
        u = usage(pid)
        if u is not None:
            out = out + u
    return out


def cpu_seconds(pid: int) -> float | None:
    """The CPU time ``pid`` has used so far, user and system; ``None`` when it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        # the fields after the command name: state is the first, utime the 12th, stime the 13th (proc(5))
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, ValueError, IndexError):
        return None


def machine_busy_seconds() -> float:
    """The CPU time the machine's cores have spent on anything but idling and waiting for I/O, summed."""
    cpu = (PROC / "stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in cpu[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / TICKS


def parents() -> dict[int, int]:
    """Every process's parent id now."""
    out: dict[int, int] = {}
    for d in PROC.iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (d / "stat").read_text()
            # the command name in parentheses may hold spaces and parentheses: the fields follow the last ")"
            out[int(d.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return out


def descendants(root: int, parent_of: Mapping[int, int]) -> list[int]:
    """Every process below ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_of.items():
        children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cmdline(pid: int) -> list[str]:
    """``pid``'s arguments; empty when it is gone."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


@dataclass(frozen=True)
class ControllerTree:
    """A ``livectl run`` process and what it started: its Python (the driver's Python side), its Spark JVM (the
    driver, and in ``local[N]`` the executors), and the Python workers below the JVM (Spark's worker daemon and
    the workers it forked)."""

    driver_python: Usage | None
    jvm: Usage
    workers: Usage
    jvm_pids: tuple[int, ...] = ()
    worker_pids: tuple[int, ...] = ()


def controller_tree(root: int, parent_of: Mapping[int, int]) -> ControllerTree:
    jvms: list[int] = []
    others: list[int] = []
    for pid in descendants(root, parent_of):
        args = cmdline(pid)
        (jvms if args and os.path.basename(args[0]) == "java" else others).append(pid)
    below_jvm = {p for j in jvms for p in descendants(j, parent_of)}
    workers = tuple(p for p in others if p in below_jvm)
    return ControllerTree(usage(root), total(jvms), total(workers), tuple(jvms), workers)
