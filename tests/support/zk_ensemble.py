"""A real ZooKeeper ensemble for tests: three of Debian's servers on loopback (:mod:`livectl.local`), with
the faults the reliability tests need — the leader SIGKILLed, a server stopped — and a way back.

:class:`Ensemble` keeps the servers by name (``zookeeper-1`` …); a server killed or stopped is started
again by :meth:`Ensemble.heal` from the ``zoo.cfg`` it was started with (same ports, same data). Every
process is signalled by PID, after checking it still runs its own ``zoo.cfg``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kazoo.client import KazooClient
from waiting import wait_until

from livectl import local


class Ensemble:
    """The servers of one ensemble, by name; :attr:`connect` lists them all."""

    def __init__(self, servers: list[local.Service]) -> None:
        self.servers = {svc.name: svc for svc in servers}

    @property
    def connect(self) -> str:
        return ",".join(svc.address for svc in self.servers.values())

    def modes(self) -> dict[str, str | None]:
        """Each server's ``srvr`` mode (``None``: stopped or not serving)."""
        return {name: local.zookeeper_mode(svc.port) if svc.running() else None for name, svc in self.servers.items()}

    def leader(self, timeout: float = 60.0) -> local.Service:
        """The server that is leader now, once there is one and every running server serves."""

        def settled() -> str | None:
            modes = self.modes()
            running = [n for n, svc in self.servers.items() if svc.running()]
            leaders = [n for n, m in modes.items() if m == "leader"]
            serving = all(modes[n] in ("leader", "follower") for n in running)
            return leaders[0] if len(leaders) == 1 and serving else None

        name = wait_until("one leader among the ensemble's running servers", settled, timeout, detail=self._detail)
        return self.servers[name]

    def followers(self) -> list[local.Service]:
        modes = self.modes()
        return [svc for name, svc in self.servers.items() if modes[name] == "follower"]

    def kill(self, svc: local.Service) -> None:
        """SIGKILL ``svc`` (no shutdown of its own) and wait until it is gone."""
        assert svc.running(), f"{svc.name} (pid {svc.pid}) is not running"
        os.kill(svc.pid, signal.SIGKILL)
        wait_until(
            f"{svc.name} gone after SIGKILL", lambda: local.stop_process(svc.pid, svc.marker) or not svc.running()
        )

    def stop(self, svc: local.Service) -> None:
        """Stop ``svc`` the ordinary way (SIGTERM, then SIGKILL after 10 s)."""
        local.stop_process(svc.pid, svc.marker)

    def heal(self, timeout: float = 60.0) -> None:
        """Start again every server that is not running, from its own ``zoo.cfg``, and wait for a leader."""
        for name, svc in list(self.servers.items()):
            if not svc.running():
                self.servers[name] = local.start_zookeeper_server(Path(svc.marker), timeout)
        self.leader(timeout)

    def client(self, server: local.Service | None = None, chroot: str = "") -> KazooClient:
        """A started kazoo client of the whole ensemble, or of ``server`` alone."""
        hosts = server.address if server is not None else self.connect
        c = KazooClient(hosts=hosts + chroot, timeout=10)
        c.start(timeout=30)
        return c

    def stop_all(self) -> None:
        for svc in self.servers.values():
            local.stop_process(svc.pid, svc.marker)

    def _detail(self) -> str:
        lines = [f"{n}: pid {s.pid} running={s.running()} log {s.log}" for n, s in self.servers.items()]
        return "\n".join(lines)


@contextmanager
def running_ensemble(run_dir: Path, servers: int = 3) -> Iterator[Ensemble]:
    """An ensemble of ``servers`` under ``run_dir``, stopped by PID on the way out."""
    ensemble = Ensemble(local.start_zookeeper_ensemble(run_dir, servers))
    try:
        yield ensemble
    finally:
        ensemble.stop_all()
