"""Test hosts in network namespaces (bench/harness/netns.py): a cut stops the traffic between two hosts,
silently, and not to a third; healing brings it back; closing leaves no namespace, veth or rule. A degraded
link (tc's tbf) slows and drops what two hosts exchange, both ways, and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from bench.harness.netns import Host, Network, Shaping, network, parse_namespace_name, sweep_stale

pytestmark = pytest.mark.integration

_SERVE = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7000))
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"hello")
    c.close()
"""

_CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], 7000), timeout=float(sys.argv[2])) as c:
        print(c.recv(16).decode())
except OSError as e:
    print(type(e).__name__)
"""


def _reach(src: Host, dst: Host, timeout: float = 1.0) -> str:
    """What a connect from ``src`` to ``dst``'s server answers: ``hello``, or the error's name."""
    done = src.run([sys.executable, "-c", _CONNECT, dst.address, str(timeout)], timeout=timeout + 10)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _ours(net: Network) -> dict[str, list[Any]]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    rules = json.loads(subprocess.run(["ip", "-j", "rule", "show"], capture_output=True, text=True, check=True).stdout)
    prefix = f"10.231.{net.subnet}."
    return {
        "namespaces": [
            n.split()[0] for n in names.splitlines() if (p := parse_namespace_name(n.split()[0])) and p[0] == net.pid
        ],
        "veths": [ln for ln in links.splitlines() if f"lv{net.pid}h" in ln],
        "rules": [
            r for r in rules if str(r.get("src", "")).startswith(prefix) or str(r.get("dst", "")).startswith(prefix)
        ],
    }


def test_a_cut_stops_traffic_between_two_hosts_and_not_to_a_third() -> None:
    servers: list[subprocess.Popen[str]] = []
    with network() as net:
        a, b, c = (net.add_host(n) for n in ("a", "b", "c"))
        try:
            for h in (b, c):
                p = subprocess.Popen(
                    h.command([sys.executable, "-c", _SERVE, h.address]), stdout=subprocess.PIPE, text=True
                )
                servers.append(p)
                assert p.stdout is not None and p.stdout.readline().strip() == "listening"
            assert _reach(a, b) == "hello" and _reach(a, c) == "hello" and _reach(c, b) == "hello"

            net.cut(a, b)
            # silent: a connect times out, nothing refuses it
            assert _reach(a, b) == "TimeoutError"
            assert _reach(a, c) == "hello"  # a third host is still reached, from a and from b's side
            assert _reach(c, b) == "hello"
            assert len(_ours(net)["rules"]) == 2

            net.heal(a, b)
            wait_until("a reaches b again", lambda: _reach(a, b) == "hello", timeout=10)
            assert _ours(net)["rules"] == []
            net.cut(b, a)  # left cut: close() must take the rules away too
        finally:
            for p in servers:
                p.kill()
                p.wait(10)
    assert _ours(net) == {"namespaces": [], "veths": [], "rules": []}


def test_the_sweep_removes_what_a_dead_session_left() -> None:
    dead = next(p for p in range(4_000_000, 4_100_000) if not Path(f"/proc/{p}").exists())
    net = Network(pid=dead)
    a, b = net.add_host("a"), net.add_host("b")
    net.cut(a, b)
    assert _ours(net)["namespaces"] and _ours(net)["veths"] and _ours(net)["rules"]
    gone = sweep_stale()  # as the next session starts: the pid that made them no longer runs
    assert a.namespace in gone and b.namespace in gone
    assert _ours(net) == {"namespaces": [], "veths": [], "rules": []}


_SINK = """
import socket, sys, time
s = socket.socket()
s.bind((sys.argv[1], 7001))
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    t, n = time.monotonic(), 0
    while d := c.recv(65536):
        n += len(d)
    print(n, round(time.monotonic() - t, 2), flush=True)
    c.close()
"""

_SEND = """
import socket, sys
with socket.create_connection((sys.argv[1], 7001), timeout=60) as c:
    c.sendall(b"x" * int(sys.argv[2]))
"""


def test_a_degraded_link_is_slow_and_lossy_both_ways_between_two_hosts_only() -> None:
    servers: list[subprocess.Popen[str]] = []
    with network() as net:
        a, b, c = (net.add_host(n) for n in ("a", "b", "c"))
        try:
            sinks = {}
            for h in (a, b, c):
                p = subprocess.Popen(
                    h.command([sys.executable, "-c", _SINK, h.address]), stdout=subprocess.PIPE, text=True
                )
                servers.append(p)
                assert p.stdout is not None and p.stdout.readline().strip() == "listening"
                sinks[h.name] = p.stdout

            def send(src: Host, dst: Host, n: int) -> tuple[int, float]:
                assert src.run([sys.executable, "-c", _SEND, dst.address, str(n)], timeout=90).returncode == 0
                got, seconds = sinks[dst.name].readline().split()
                return int(got), float(seconds)

            net.degrade(a, [b], Shaping(rate="64kbit", burst="1600b", limit="3000b"))
            # 32 KB at 8 KB/s: seconds, not milliseconds, and every byte there (TCP retransmits the drops)
            got, seconds = send(a, b, 32_000)
            assert got == 32_000 and seconds > 2.5
            got, seconds = send(b, a, 32_000)
            assert got == 32_000 and seconds > 2.5
            stats = net.shaped(a)
            assert stats["out"]["drops"] > 0 and stats["in"]["drops"] > 0, stats
            # a third host is not on the degraded link, from a's side or b's
            assert send(a, c, 1_000_000)[1] < 1.5
            assert send(c, b, 1_000_000)[1] < 1.5
            # nor through its tbf: a's link to b may still carry the last exchange's stray ACKs, not 2 MB
            after = net.shaped(a)
            assert all(after[way]["bytes"] - stats[way]["bytes"] < 10_000 for way in ("out", "in")), (stats, after)

            net.restore(a)
            assert net.shaped(a) == {}
            assert send(a, b, 1_000_000)[1] < 1.5
            net.degrade(b, [a], Shaping())  # left degraded: close() must take it away (the namespaces go)
        finally:
            for p in servers:
                p.kill()
                p.wait(10)
    assert _ours(net) == {"namespaces": [], "veths": [], "rules": []}
