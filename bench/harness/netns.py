"""Test hosts as Linux network namespaces, and partitions between them.

Each :class:`Host` is a namespace of its own with one veth pair to the root namespace: ``10.231.S.(4i+2)/30``
inside, ``10.231.S.(4i+1)/30`` on the root's end, a default route through it, and the root forwarding
between hosts (``net.ipv4.ip_forward=1``). ``S`` is a /24 that no interface on the machine uses when the
:class:`Network` is made (:func:`choose_subnet`). Processes run in a host with ``ip netns exec``
(:meth:`Host.command`); the test process itself stays in the root namespace and reaches every host.

A partition is policy routing in the root namespace: ``ip rule add from A to B blackhole`` drops what A
sends to B silently (a connect times out, an open connection hears nothing; nothing is refused), and
:meth:`Network.cut` adds both directions; :meth:`Network.heal` deletes them. ``tc netem``, iptables and
nftables are not available on these machines; a routing rule is what is.

A degraded link (:meth:`Network.degrade`) is ``tc``'s token bucket filter, which the kernel has: a rate cap,
a short queue (queueing delay) and tail drops, on the packets between a host and chosen peers only (an
``htb`` root with ``u32`` filters picks them), both ways: on the host's end of its veth and on the root's end.
Without ``netem`` there is no pure delay and no random loss.

Names carry the session: namespaces are ``lvt<pid>-<S>-<host>``, veths ``lv<pid>h<i>`` (root end) and
``lv<pid>h<i>p`` (the host's). :meth:`Network.close` kills what still runs in the hosts, deletes the
namespaces (their veths go with them) and every rule it added; :func:`sweep_stale` removes what a session
that died left (namespaces whose pid no longer runs, their processes, and the rules on their /24).

The services: :func:`start_zookeeper` (Debian's ZooKeeper, from :mod:`livectl.local`'s template, listening
on the host's address), :func:`start_zookeeper_ensemble` (an ensemble of them, each server in a host of its
own; :class:`Ensemble` finds the leader, kills and restarts a server) and :func:`start_kafka` (Apache Kafka
through :mod:`livectl.kafka_server`, run by a Python started in the host so the broker runs there; it
advertises the host's address).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from livectl import local
from livectl.spawn import spawn, wait_ready

#: every namespace of these tests starts with it (the sweep looks for it)
PREFIX = "lvt"
#: the first two octets of every address; the third is the session's /24, the fourth the host's /30
NET = "10.231"
#: hosts per network: a /24 holds 64 /30s, the first is left unused
MAX_HOSTS = 63
_NAME_RE = re.compile(rf"^{PREFIX}(\d+)-(\d+)-([a-z0-9-]+)$")


class NetnsError(RuntimeError):
    pass


# ---------------------------------------------------------------------------- the pure parts


@dataclass(frozen=True)
class HostAddresses:
    """Host ``index``'s /30 in subnet ``subnet`` (``10.231.<subnet>.0/24``)."""

    subnet: int
    index: int

    def __post_init__(self) -> None:
        if not 0 <= self.subnet <= 255:
            raise ValueError(f"subnet: must be 0..255, got {self.subnet}")
        if not 1 <= self.index <= MAX_HOSTS:
            raise ValueError(f"index: must be 1..{MAX_HOSTS}, got {self.index}")

    @property
    def gateway(self) -> str:
        """The root namespace's end."""
        return f"{NET}.{self.subnet}.{4 * self.index + 1}"

    @property
    def address(self) -> str:
        """The host's own address."""
        return f"{NET}.{self.subnet}.{4 * self.index + 2}"


def namespace_name(pid: int, subnet: int, host: str) -> str:
    if not re.fullmatch(r"[a-z0-9-]+", host):
        raise ValueError(f"host: lower-case letters, digits and '-' only, got {host!r}")
    return f"{PREFIX}{pid}-{subnet}-{host}"


def parse_namespace_name(name: str) -> tuple[int, int, str] | None:
    """``(pid, subnet, host)`` of a namespace these tests made, else ``None``."""
    m = _NAME_RE.match(name)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def veth_names(pid: int, index: int) -> tuple[str, str]:
    """The root end's and the host end's names (an interface name has at most 15 characters)."""
    root = f"lv{pid}h{index}"
    if len(root) + 1 > 15:
        raise ValueError(f"pid {pid} and host {index} make an interface name longer than 15 characters")
    return root, f"{root}p"


def rule_commands(action: str, a: str, b: str) -> list[list[str]]:
    """The ``ip rule`` commands that cut (``add``) or heal (``del``) both directions between addresses
    ``a`` and ``b``."""
    if action not in ("add", "del"):
        raise ValueError(f"action: 'add' or 'del', got {action!r}")
    for what, addr in (("a", a), ("b", b)):
        try:
            ok = addr.count(".") == 3 and bool(socket.inet_aton(addr))
        except OSError:
            ok = False
        if not ok:
            raise ValueError(f"{what}: an IPv4 address, got {addr!r}")
    return [["ip", "rule", action, "from", x, "to", y, "blackhole"] for x, y in ((a, b), (b, a))]


@dataclass(frozen=True)
class Shaping:
    """A degraded link: ``tc``'s token bucket filter (``tbf``), the one shaper the machines' kernel has (no
    ``netem``). ``rate`` caps the bandwidth; ``burst`` is the bucket (what may go at once, at least one MTU);
    ``limit`` is the queue in bytes behind it: what does not fit is dropped (a tail drop TCP must
    retransmit), and it bounds the queueing delay at ``limit / rate``. Units are ``tc``'s (``32kbit``,
    ``1600b``)."""

    rate: str = "32kbit"
    burst: str = "1600b"
    limit: str = "3000b"

    def tbf(self) -> list[str]:
        return ["tbf", "rate", self.rate, "burst", self.burst, "limit", self.limit]


#: the handle of the ``tbf`` a degraded link's traffic goes through (its statistics: :meth:`Network.shaped`)
TBF_HANDLE = "10:"


def shaping_commands(dev: str, match: str, peers: Sequence[str], shaping: Shaping, ns: str | None) -> list[list[str]]:
    """What shapes the packets ``dev`` sends whose ``match`` (``src`` or ``dst``) address is one of ``peers``,
    and only them: an ``htb`` root whose unclassified packets go straight through (no default class), one
    class of an unlimited rate holding the ``tbf`` (:data:`TBF_HANDLE`), and a ``u32`` filter per peer
    sending its packets there. ``ns``: the namespace ``dev`` is in (``None``: the root namespace)."""
    if match not in ("src", "dst"):
        raise ValueError(f"match: 'src' or 'dst', got {match!r}")
    if not peers:
        raise ValueError("peers: at least one address")
    for addr in peers:
        rule_commands("add", addr, addr)  # validates the address
    tc = ["tc", *(["-n", ns] if ns else [])]
    out = [
        [*tc, *f"qdisc add dev {dev} root handle 1: htb".split()],
        # the class itself does not limit (the tbf does); the kernel says once that a tbf under an htb class is
        # "non-work-conserving", which is the point
        [*tc, *f"class add dev {dev} parent 1: classid 1:1 htb rate 10gbit quantum 60000".split()],
        [*tc, *f"qdisc add dev {dev} parent 1:1 handle {TBF_HANDLE}".split(), *shaping.tbf()],
    ]
    for addr in peers:
        out.append(
            [*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
             "match", "ip", match, f"{addr}/32", "flowid", "1:1"]
        )  # fmt: skip
    return out


def host_setup_commands(ns: str, addrs: HostAddresses, veths: tuple[str, str]) -> list[list[str]]:
    """What makes a host: the namespace, the veth pair, the addresses, links up and the default route."""
    root, inner = veths
    in_ns = ["ip", "-n", ns]
    return [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", root, "type", "veth", "peer", "name", inner],
        ["ip", "link", "set", inner, "netns", ns],
        ["ip", "addr", "add", f"{addrs.gateway}/30", "dev", root],
        ["ip", "link", "set", root, "up"],
        [*in_ns, "addr", "add", f"{addrs.address}/30", "dev", inner],
        [*in_ns, "link", "set", "lo", "up"],
        [*in_ns, "link", "set", inner, "up"],
        [*in_ns, "route", "add", "default", "via", addrs.gateway],
    ]


def used_subnets(addresses: Sequence[str]) -> set[int]:
    """The third octets of ``10.231.x.y`` addresses (CIDR or plain) among ``addresses``."""
    out = set()
    for a in addresses:
        parts = a.split("/")[0].split(".")
        if len(parts) == 4 and ".".join(parts[:2]) == NET:
            out.add(int(parts[2]))
    return out


def choose_subnet(pid: int, used: set[int]) -> int:
    """A /24 not in ``used``, starting from one derived from ``pid`` (parallel sessions spread out)."""
    for k in range(256):
        s = (pid + k) % 250 + 1
        if s not in used:
            return s
    raise NetnsError(f"no free /24 in {NET}.0.0/16")


# ---------------------------------------------------------------------------- running commands


def _run(cmd: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(cmd), capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


def _kill_processes_in(ns: str) -> None:
    """SIGKILL what runs in ``ns`` (processes these tests started there), then wait until it is gone."""
    for _ in range(50):
        pids = [int(p) for p in _run(["ip", "netns", "pids", ns], check=False).stdout.split()]
        if not pids:
            return
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        time.sleep(0.1)


def _delete_namespace(ns: str) -> None:
    _kill_processes_in(ns)
    _run(["ip", "netns", "del", ns], check=False)


def _rules_on(subnet: int) -> list[list[str]]:
    """The ``ip rule del`` commands for every blackhole rule touching ``10.231.<subnet>.0/24``."""
    out = []
    for r in json.loads(_run(["ip", "-j", "rule", "show"]).stdout or "[]"):
        src, dst = r.get("src", ""), r.get("dst", "")
        if r.get("action") == "blackhole" and subnet in used_subnets([src, dst]):
            out.append(["ip", "rule", "del", "from", src, "to", dst, "blackhole"])
    return out


def sweep_stale() -> list[str]:
    """Delete the namespaces (with their processes and veths) and rules of sessions whose pid no longer
    runs; what was deleted."""
    gone = []
    live_subnets = set()
    stale_subnets = set()
    for ns in _namespaces():
        parsed = parse_namespace_name(ns)
        if parsed is None:
            continue
        pid, subnet, _ = parsed
        if Path(f"/proc/{pid}").exists():
            live_subnets.add(subnet)
            continue
        _delete_namespace(ns)
        stale_subnets.add(subnet)
        gone.append(ns)
    for line in _run(["ip", "-o", "link", "show"]).stdout.splitlines():
        m = re.match(r"^\d+: (lv(\d+)h\d+)[@:]", line)
        if m and not Path(f"/proc/{m.group(2)}").exists():
            _run(["ip", "link", "del", m.group(1)], check=False)
            gone.append(m.group(1))
    for subnet in stale_subnets - live_subnets:
        for cmd in _rules_on(subnet):
            _run(cmd, check=False)
            gone.append(" ".join(cmd))
    return gone


# ---------------------------------------------------------------------------- hosts and the network


@dataclass
class Host:
    name: str
    namespace: str
    addrs: HostAddresses

    @property
    def address(self) -> str:
        return self.addrs.address

    @property
    def prefix(self) -> list[str]:
        """What runs a command in this host (``ip netns exec`` and ``env`` both exec it: its pid is the
        command's). Spark's driver binds loopback: the machine's name resolves to an address this host
        does not have."""
        return ["ip", "netns", "exec", self.namespace, "env", "SPARK_LOCAL_IP=127.0.0.1"]

    @property
    def exec_prefix(self) -> list[str]:
        """What runs a command in this host with its environment as given (``ip netns exec``, which execs
        it): for Spark's processes, which are told their address (``SPARK_LOCAL_IP``) themselves, in an
        environment whose ``PATH`` need not hold ``ip``."""
        return [shutil.which("ip") or "/usr/sbin/ip", "netns", "exec", self.namespace]

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run in this host."""
        return [*self.prefix, *argv]

    def run(self, argv: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout, check=False
        )


@dataclass
class Network:
    """Hosts made by this process; :meth:`close` (or the context manager) deletes them and every cut."""

    pid: int = field(default_factory=os.getpid)
    subnet: int = -1
    hosts: dict[str, Host] = field(default_factory=dict)
    cuts: set[tuple[str, str]] = field(default_factory=set)
    #: hosts whose link is degraded (:meth:`degrade`)
    degraded: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.subnet < 0:
            addrs = _run(["ip", "-o", "-4", "addr", "show"]).stdout.split()
            taken = used_subnets(addrs)
            for ns in _namespaces():
                parsed = parse_namespace_name(ns)
                if parsed is not None:
                    taken.add(parsed[1])
            self.subnet = choose_subnet(self.pid, taken)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_host(self, name: str) -> Host:
        if name in self.hosts:
            raise ValueError(f"host {name!r} exists")
        index = len(self.hosts) + 1
        addrs = HostAddresses(self.subnet, index)
        ns = namespace_name(self.pid, self.subnet, name)
        host = Host(name, ns, addrs)
        self.hosts[name] = host
        if Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() != "1":
            _run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        for cmd in host_setup_commands(ns, addrs, veth_names(self.pid, index)):
            _run(cmd)
        return host

    def cut(self, a: Host, b: Host) -> None:
        """Drop everything between ``a`` and ``b``, both ways, silently."""
        key = (min(a.name, b.name), max(a.name, b.name))
        if key in self.cuts:
            return
        for cmd in rule_commands("add", a.address, b.address):
            _run(cmd)
        self.cuts.add(key)

    def heal(self, a: Host, b: Host) -> None:
        key = (min(a.name, b.name), max(a.name, b.name))
        for cmd in rule_commands("del", a.address, b.address):
            _run(cmd, check=False)
        self.cuts.discard(key)

    def _devices(self, host: Host) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
        """``(device, namespace)`` of the host's end (what it sends) and of the root's end (what it hears)."""
        root, inner = veth_names(self.pid, host.addrs.index)
        return (inner, host.namespace), (root, None)

    def degrade(self, host: Host, peers: Sequence[Host], shaping: Shaping) -> None:
        """Degrade (not cut) what ``host`` exchanges with ``peers``, both ways, and nothing else: on the
        host's end of its veth what it sends to them, on the root's end what they send it, each through a
        :class:`Shaping` of its own. One degradation per host at a time; :meth:`restore` ends it."""
        if host.name in self.degraded:
            raise NetnsError(f"{host.name}'s link is degraded already")
        addrs = [p.address for p in peers]
        (inner, ns), (root, _) = self._devices(host)
        self.degraded.add(host.name)
        for cmd in shaping_commands(inner, "dst", addrs, shaping, ns) + shaping_commands(
            root, "src", addrs, shaping, None
        ):
            _run(cmd)

    def shaped(self, host: Host) -> dict[str, dict[str, int]]:
        """The ``tbf`` statistics of a degraded host: ``{"out": …, "in": …}`` (what the host sent to its peers,
        what they sent it), each ``{"packets", "bytes", "drops", "overlimits"}`` (``tc -s qdisc``)."""
        out = {}
        for way, (dev, ns) in zip(("out", "in"), self._devices(host), strict=True):
            tc = ["tc", *(["-n", ns] if ns else []), "-s", "-j", "qdisc", "show", "dev", dev]
            for q in json.loads(_run(tc).stdout or "[]"):
                if q.get("kind") == "tbf" and q.get("handle") == TBF_HANDLE:
                    out[way] = {k: int(q.get(k, 0)) for k in ("packets", "bytes", "drops", "overlimits")}
        return out

    def restore(self, host: Host) -> None:
        """Heal a degraded link (deletes both ends' qdiscs)."""
        for dev, ns in self._devices(host):
            _run(["tc", *(["-n", ns] if ns else []), "qdisc", "del", "dev", dev, "root"], check=False)
        self.degraded.discard(host.name)

    def close(self) -> None:
        for name in list(self.degraded):
            self.restore(self.hosts[name])
        for x, y in list(self.cuts):
            self.heal(self.hosts[x], self.hosts[y])
        for cmd in _rules_on(self.subnet):  # any left by a cut that failed half-way
            _run(cmd, check=False)
        for host in self.hosts.values():
            _delete_namespace(host.namespace)
            # the kernel deletes a pair whose namespace went, but not always before the next look
            _run(["ip", "link", "del", veth_names(self.pid, host.addrs.index)[0]], check=False)
        self.hosts.clear()


@contextlib.contextmanager
def network() -> Iterator[Network]:
    """A :class:`Network`, after sweeping what dead sessions left; closed on the way out."""
    sweep_stale()
    net = Network()
    try:
        yield net
    finally:
        net.close()


# ---------------------------------------------------------------------------- services in hosts


def start_zookeeper(host: Host, run_dir: Path, port: int = 2181, timeout: float = 30.0) -> local.Service:
    """Debian's ZooKeeper standalone in ``host``, serving on the host's address (the template of
    ``livectl local up``, bound there instead of loopback)."""
    java = local.find_java()
    local.check_zookeeper_installed()
    data = run_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    cfg = run_dir / "zoo.cfg"
    cfg.write_text(local.zookeeper_config(data, port, host.address))
    log = run_dir / "zookeeper.log"
    cp = f"{local.ZOOKEEPER_CONF_DIR}:{local.ZOOKEEPER_JAR}"
    cmd = host.command([java, "-Xms64m", "-Xmx128m", "-cp", cp, local.ZOOKEEPER_MAIN, str(cfg)])
    proc = spawn(cmd, log)

    def ok() -> bool:
        try:
            with socket.create_connection((host.address, port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(16) == b"imok"
        except OSError:
            return False

    wait_ready(proc, ok, "ZooKeeper", log, timeout)
    return local.Service("zookeeper", proc.pid, port, f"{host.address}:{port}", str(log), str(cfg))


@dataclass
class Ensemble:
    """A ZooKeeper ensemble whose every server runs in a host of its own (``servers[i]`` in ``hosts[i]``)."""

    hosts: list[Host]
    servers: list[local.Service]

    @property
    def connect(self) -> str:
        return ",".join(s.address for s in self.servers)

    def host_of(self, server: local.Service) -> Host:
        return self.hosts[self.servers.index(server)]

    def modes(self) -> list[str | None]:
        """Each server's ``srvr`` mode (``leader``, ``follower``; ``None``: down or not serving)."""
        return [local.zookeeper_mode(s.port, host=h.address) if s.running() else None for s, h in self._pairs()]

    def leader(self, timeout: float = 60.0) -> local.Service:
        """The leader, once there is one and every running server serves."""
        deadline = time.monotonic() + timeout
        modes: list[str | None] = []
        while time.monotonic() < deadline:
            modes = self.modes()
            running = [m for m, s in zip(modes, self.servers, strict=True) if s.running()]
            if running.count("leader") == 1 and all(m in ("leader", "follower") for m in running):
                return self.servers[modes.index("leader")]
            time.sleep(0.2)
        raise NetnsError(f"no settled ZooKeeper leader after {timeout:.0f} s: modes {modes}")

    def clients(self, server: local.Service) -> list[str]:
        """The addresses of the clients connected to ``server`` (its four-letter ``stat``)."""
        host = self.host_of(server)
        try:
            with socket.create_connection((host.address, server.port), timeout=2) as s:
                s.sendall(b"stat")
                chunks = []
                while chunk := s.recv(4096):
                    chunks.append(chunk)
        except OSError:
            return []
        return re.findall(r"^\s*/([\d.]+):\d+\[", b"".join(chunks).decode(errors="replace"), re.MULTILINE)

    def kill(self, server: local.Service) -> None:
        """SIGKILL ``server`` (no shutdown of its own) and wait until it is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGKILL)
        local.stop_process(server.pid, server.marker)

    def restart(self, server: local.Service, timeout: float = 60.0) -> local.Service:
        """Start ``server`` again in its host from its own ``zoo.cfg`` (same data), once it serves."""
        i = self.servers.index(server)
        self.servers[i] = local.start_zookeeper_server(Path(server.marker), timeout, self.hosts[i].prefix)
        return self.servers[i]

    def stop(self) -> None:
        for s in self.servers:
            local.stop_process(s.pid, s.marker)

    def _pairs(self) -> list[tuple[local.Service, Host]]:
        return list(zip(self.servers, self.hosts, strict=True))


def start_zookeeper_ensemble(hosts: Sequence[Host], run_dir: Path, timeout: float = 60.0) -> Ensemble:
    """An ensemble of Debian's ZooKeeper, server N in ``hosts[N-1]`` on the host's address (clients on 2181,
    quorum 2888, election 3888): :mod:`livectl.local`'s ``zoo.cfg`` files, each server started in its host."""
    local.find_java()
    local.check_zookeeper_installed()
    members = [local.EnsembleServer(h.address, 2181, 2888, 3888) for h in hosts]
    configs = local.write_ensemble_configs(run_dir, members, heap="128m")
    servers = local.start_ensemble_servers(configs, timeout, [h.prefix for h in hosts])
    return Ensemble(list(hosts), servers)


_START_KAFKA = """
import json, sys
from dataclasses import asdict
from pathlib import Path
from livectl.kafka_server import KafkaSettings, start_kafka
address, run_dir = sys.argv[1], Path(sys.argv[2])
settings = KafkaSettings(properties={
    "listeners": f"PLAINTEXT://{address}:9092,CONTROLLER://127.0.0.1:9093",
    "advertised.listeners": f"PLAINTEXT://{address}:9092",
    "controller.quorum.voters": "1@127.0.0.1:9093",
})
svc = start_kafka(run_dir, ports={"PLAINTEXT": 9092, "CONTROLLER": 9093}, settings=settings)
print(json.dumps(asdict(svc)))
"""


def start_kafka(host: Host, run_dir: Path, timeout: float = 150.0) -> local.Service:
    """Apache Kafka (:func:`livectl.kafka_server.start_kafka`) in ``host``: a Python in the host starts it
    and returns its record; ``.bootstrap`` is ``<host address>:9092``."""
    done = subprocess.run(
        host.command([sys.executable, "-c", _START_KAFKA, host.address, str(run_dir)]),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise NetnsError(f"Kafka did not start in {host.name}: {done.stderr.strip()[-2000:]}")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    svc = local.Service(**record)
    listeners = {**svc.listeners, "PLAINTEXT": f"{host.address}:9092"}
    return local.Service(**{**asdict(svc), "address": f"{host.address}:9092", "listeners": listeners})
