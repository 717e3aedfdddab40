"""The machine a benchmark ran on and its results: ``bench/results/<name>-<UTC stamp>.json`` (outside git)
with the machine record, a printed table, and the wait for a quiet machine before a run."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from livectl import local

ROOT = Path(__file__).resolve().parents[2]


RESULTS_DIR = ROOT / "bench" / "results"


def _cmd(args: list[str]) -> str:
    try:
        return subprocess.run(args, check=False, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def zookeeper_version(port: int | None = None) -> str:
    if port is not None:
        import socket

        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"srvr")
            text = s.recv(4096).decode(errors="replace")
            for line in text.splitlines():
                if line.startswith("Zookeeper version:"):
                    server = line.split(":", 1)[1].strip().split(",")[0].split("-")[0]
                    return f"{server} (Debian package {_cmd(['dpkg-query', '-W', '-f', '${Version}', 'zookeeper'])})"
    return _cmd(["dpkg-query", "-W", "-f", "${Version}", "zookeeper"]) or "unknown"


def machine_info(zk_port: int | None = None, spark: Any = None) -> dict[str, Any]:
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    import kafka
    import kazoo
    import pyspark

    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": cpu_model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "load_average_at_start": list(os.getloadavg()),
        "os": platform.platform(),
        "python": platform.python_version(),
        "spark": spark.version if spark is not None else pyspark.__version__,
        "spark_master": spark.sparkContext.master if spark is not None else None,
        "zookeeper": zookeeper_version(zk_port),
        "kazoo": getattr(kazoo, "__version__", _pip_version("kazoo")),
        "kafka_python": kafka.__version__,
        "broker": f"Apache Kafka {local.kafka_version()} (one KRaft node)",
        "git_commit": _cmd(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "git_dirty_files": _cmd(["git", "-C", str(ROOT), "status", "--short", "--untracked-files=no"]).splitlines(),
    }


def _pip_version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


#: one results file per run of a script (rewritten as the run goes)
RUN_STAMP = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = RUN_STAMP
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    text = json.dumps(payload, indent=2, sort_keys=False, default=str)
    path.write_text(text + "\n")
    (RESULTS_DIR / f"{name}-latest.json").write_text(text + "\n")
    return path


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print("  ".join(c.rjust(w) if n else c.ljust(w) for c, w in zip(r, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:,.2f}" if abs(c) < 100 else f"{c:,.0f}"
    if isinstance(c, int):
        return f"{c:,}"
    return "-" if c is None else str(c)


def wait_quiet(max_load: float = 1.5, max_wait_s: float = 600.0) -> float:
    """Wait (up to ``max_wait_s``) for the 1-minute load average to drop below ``max_load``."""
    deadline = time.monotonic() + max_wait_s
    load = os.getloadavg()[0]
    while load > max_load and time.monotonic() < deadline:
        print(f"load average {load:.2f} > {max_load}: waiting for a quiet machine", flush=True)
        time.sleep(30)
        load = os.getloadavg()[0]
    return load
