"""Profile: what a new controller's ZooKeeper read costs, part by part, before its first micro-batch.

On a real local ZooKeeper (free port, stopped by PID) with a cluster in Kafka's layout (default 100k
partitions, 10 brokers, replication factor 3), this times what :class:`streaming.app.ControllerApp` does
between winning the lease and publishing the failover reference:

* ``read_snapshot`` — :func:`streaming.zk_snapshot.read_snapshot` as the product runs it, and inside it:
  the pipelined ``get_async`` of every znode (measured alone, same window) and the decoding
  (:func:`core.zkdata.snapshot_from_znodes`);
* ``write_snapshot`` — :func:`streaming.failover.write_snapshot`: split by bucket, JSON, files;
* cProfile's top functions of ``read_snapshot`` with ``--profile``;
* a bench-only prototype: the 100k state znodes read with ZooKeeper's ``multiRead`` (100 ``getData``
  per request, pipelined) beside the product's per-znode ``get_async``, same data checked.

Run: ``.venv/bin/python bench/snapshot_cost.py [--partitions 100000] [--buckets 8] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import tempfile
import time
from typing import Any

from _common import (
    close,
    machine_info,
    plan_layout,
    prepare_tree,
    register_brokers,
    write_results,
    zk_client,
)

from core import zkdata
from livectl import local
from streaming import failover
from streaming.zk_snapshot import read_brokers, read_snapshot


def multi_read_class() -> Any:
    """A bench-only kazoo request for ZooKeeper's ``multiRead`` (opcode 22, ZooKeeper >= 3.6): several
    ``getData`` in one request. kazoo 2.11 has no client call for it; this prototype measures the gain."""
    from collections import namedtuple

    from kazoo.exceptions import EXCEPTIONS
    from kazoo.protocol.serialization import (
        MultiHeader,
        ZnodeStat,
        int_struct,
        multiheader_struct,
        read_buffer,
        stat_struct,
        write_string,
    )

    class MultiRead(namedtuple("MultiRead", "paths")):
        type = 22

        def serialize(self) -> bytearray:
            b = bytearray()
            for path in self.paths:
                b.extend(MultiHeader(4, False, -1).serialize() + write_string(path) + b"\x00")
            b.extend(multiheader_struct.pack(-1, True, -1))
            return b

        @classmethod
        def deserialize(cls, data: bytes, offset: int) -> list[Any]:
            results: list[Any] = []
            header, offset = MultiHeader.deserialize(data, offset)
            while not header.done:
                if header.type == 4:
                    value, offset = read_buffer(data, offset)
                    stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                    offset += stat_struct.size
                    results.append((value, stat))
                else:
                    err = int_struct.unpack_from(data, offset)[0]
                    offset += int_struct.size
                    results.append(EXCEPTIONS[err]())
                header, offset = MultiHeader.deserialize(data, offset)
            return results

    return MultiRead


def multi_get(client: Any, paths: list[str], per_request: int = 100, in_flight: int = 50) -> dict[str, Any]:
    """``path -> (data, stat)`` with ``multiRead`` requests of ``per_request`` paths, pipelined."""
    multi_read = multi_read_class()
    out: dict[str, Any] = {}
    pending: list[tuple[list[str], Any]] = []

    def drain(item: tuple[list[str], Any]) -> None:
        chunk, handle = item
        for p, r in zip(chunk, handle.get(timeout=60), strict=True):
            if not isinstance(r, Exception):
                out[p] = r

    for i in range(0, len(paths), per_request):
        chunk = [client.chroot + p if client.chroot else p for p in paths[i : i + per_request]]
        handle = client.handler.async_result()
        client._call(multi_read(chunk), handle)
        pending.append((paths[i : i + per_request], handle))
        if len(pending) >= in_flight:
            drain(pending.pop(0))
    for item in pending:
        drain(item)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    run_dir = tempfile.mkdtemp(prefix="livectl-bench-snap-")
    from pathlib import Path

    zk = local.start_zookeeper(Path(run_dir) / "zookeeper", local.free_port())
    out: dict[str, Any] = {"benchmark": "snapshot_cost", "partitions": args.partitions, "buckets": args.buckets}
    try:
        out["machine"] = machine_info(zk.port)
        client = zk_client(zk.connect)
        layout = plan_layout(args.partitions, 10, 3)
        prepare_tree(client, layout)
        brokers = register_brokers(zk.connect, list(range(10)))
        # warm-up, then the product's read
        read_snapshot(client)
        t0 = time.perf_counter()
        snap = read_snapshot(client)
        out["read_snapshot_s"] = round(time.perf_counter() - t0, 3)
        # its parts: the pipelined gets alone (same window), then the decoding alone
        t0 = time.perf_counter()
        topics = client.get_children(zkdata.BROKER_TOPICS)
        got: dict[str, tuple[str | None, int]] = {}
        paths = [zkdata.topic_path(t) for t in topics]
        for i in range(0, len(paths), 5000):
            hs = [(p, client.get_async(p)) for p in paths[i : i + 5000]]
            for p, h in hs:
                d, st = h.get()
                got[p] = (d.decode(), st.version)
        state_paths = [
            zkdata.partition_state_path(t, int(p))
            for t in topics
            for p in json.loads(got[zkdata.topic_path(t)][0] or "{}")["partitions"]
        ]
        for i in range(0, len(state_paths), 5000):
            hs = [(p, client.get_async(p)) for p in state_paths[i : i + 5000]]
            for p, h in hs:
                d, st = h.get()
                got[p] = (d.decode(), st.version)
        out["gets_s"] = round(time.perf_counter() - t0, 3)
        out["znodes_read"] = len(got)
        out["gets_per_s"] = round(len(got) / out["gets_s"])
        # prototype: the same state znodes read with multiRead (100 getData per request)
        t0 = time.perf_counter()
        got_multi = multi_get(client, state_paths)
        out["prototype_multiread_state_znodes_s"] = round(time.perf_counter() - t0, 3)
        out["prototype_multiread_same_data"] = all(
            got_multi[p][0].decode() == got[p][0] and got_multi[p][1].version == got[p][1] for p in state_paths
        ) and len(got_multi) == len(state_paths)
        t0 = time.perf_counter()
        for i in range(0, len(state_paths), 5000):
            hs = [(p, client.get_async(p)) for p in state_paths[i : i + 5000]]
            for _p, h in hs:
                h.get()
        out["state_znodes_get_async_s"] = round(time.perf_counter() - t0, 3)
        infos = read_brokers(client)
        t0 = time.perf_counter()
        zkdata.snapshot_from_znodes(got, infos, 1, 0)
        out["decode_s"] = round(time.perf_counter() - t0, 3)
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            failover.write_snapshot(d, 1000, snap, args.buckets)
            out["write_snapshot_s"] = round(time.perf_counter() - t0, 3)
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            read_snapshot(client)
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
            print(buf.getvalue())
        for c in brokers.values():
            close(c)
        close(client)
    finally:
        local.stop_process(zk.pid, zk.marker)
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=2))
    write_results("snapshot_cost", out)


if __name__ == "__main__":
    main()
