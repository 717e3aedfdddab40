"""Fetches between simulated broker processes: one line of JSON each way over TCP loopback.

Every simulated broker listens on the endpoint it registers in ``/brokers/ids/<id>`` (as a Kafka broker's
listener does); a follower whose leader is in another process connects to the leader's endpoint, taken
from LeaderAndIsr ``liveLeaders`` or UpdateMetadata ``liveBrokers``. No ZooKeeper, no Kafka topic.

Request: ``{"leaderId", "replicaId", "maxRecords", "partitions": [{"topic", "partition", "fetchOffset",
"lastFetchedEpoch", "currentLeaderEpoch"}]}``. Response: ``{"partitions": [{"topic", "partition",
"errorCode", "highWatermark", "logEndOffset", "records": [[epoch, seq], ...], "divergingEpoch":
{"epoch", "endOffset"} | null}]}``.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import threading
from collections.abc import Callable
from typing import Any

from simbrokers.broker import FetchRequest, FetchResponse
from simbrokers.log import EpochEndOffset, Record
from simbrokers.partition import FetchPartitionRequest, FetchPartitionResponse

log = logging.getLogger(__name__)

#: (leader id, request) -> response, or None when that leader is not served here
Serve = Callable[[int, FetchRequest], FetchResponse | None]


def encode_request(leader_id: int, req: FetchRequest) -> dict[str, Any]:
    return {
        "leaderId": leader_id,
        "replicaId": req.replica_id,
        "maxRecords": req.max_records,
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "fetchOffset": p.fetch_offset,
                "lastFetchedEpoch": p.last_fetched_epoch,
                "currentLeaderEpoch": p.current_leader_epoch,
            }
            for p in req.partitions
        ],
    }


def decode_request(o: dict[str, Any]) -> tuple[int, FetchRequest]:
    parts = tuple(
        FetchPartitionRequest(
            str(p["topic"]),
            int(p["partition"]),
            int(p["fetchOffset"]),
            int(p["lastFetchedEpoch"]),
            int(p["currentLeaderEpoch"]),
        )
        for p in o["partitions"]
    )
    return int(o["leaderId"]), FetchRequest(int(o["replicaId"]), parts, int(o["maxRecords"]))


def encode_response(resp: FetchResponse) -> dict[str, Any]:
    return {
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "errorCode": p.error_code,
                "highWatermark": p.high_watermark,
                "logEndOffset": p.log_end_offset,
                "records": [[r.epoch, r.seq] for r in p.records],
                "divergingEpoch": None
                if p.diverging is None
                else {"epoch": p.diverging.epoch, "endOffset": p.diverging.end_offset},
            }
            for p in resp.partitions
        ]
    }


def decode_response(o: dict[str, Any]) -> FetchResponse:
    out = []
    for p in o["partitions"]:
        div = p.get("divergingEpoch")
        out.append(
            FetchPartitionResponse(
                str(p["topic"]),
                int(p["partition"]),
                int(p["errorCode"]),
                int(p["highWatermark"]),
                int(p["logEndOffset"]),
                tuple(Record(int(e), int(s)) for e, s in p["records"]),
                None if div is None else EpochEndOffset(int(div["epoch"]), int(div["endOffset"])),
            )
        )
    return FetchResponse(tuple(out))


class _Handler(socketserver.StreamRequestHandler):
    server: FetchServer

    def handle(self) -> None:
        for line in self.rfile:
            try:
                leader_id, req = decode_request(json.loads(line))
                resp = self.server.serve(leader_id, req)
                out = {"error": "not served here"} if resp is None else encode_response(resp)
            except (ValueError, KeyError, TypeError) as e:
                out = {"error": f"bad fetch request: {e}"}
            self.wfile.write(json.dumps(out, separators=(",", ":")).encode() + b"\n")
            self.wfile.flush()


class FetchServer(socketserver.ThreadingTCPServer):
    """Serves fetches for the brokers of this process on one listening socket per broker."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, serve: Serve) -> None:
        super().__init__((host, port), _Handler)
        self.serve = serve
        self._thread = threading.Thread(target=self.serve_forever, name=f"fetch-server-{port}", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class FetchClient:
    """Keeps one connection per leader endpoint; any failure drops it and answers None."""

    def __init__(self, timeout_s: float = 2.0) -> None:
        self.timeout_s = timeout_s
        self._conns: dict[tuple[str, int], tuple[socket.socket, Any]] = {}

    def fetch(self, host: str, port: int, leader_id: int, req: FetchRequest) -> FetchResponse | None:
        key = (host, port)
        try:
            conn = self._conns.get(key)
            if conn is None:
                sock = socket.create_connection(key, timeout=self.timeout_s)
                conn = self._conns[key] = (sock, sock.makefile("rwb"))
            _, f = conn
            f.write(json.dumps(encode_request(leader_id, req), separators=(",", ":")).encode() + b"\n")
            f.flush()
            line = f.readline()
            if not line:
                raise ConnectionError("connection closed")
            o = json.loads(line)
            if "error" in o:
                log.debug("fetch from %s:%s refused: %s", host, port, o["error"])
                return None
            return decode_response(o)
        except (OSError, ValueError, KeyError) as e:
            log.debug("fetch from broker %s at %s:%s failed: %s", leader_id, host, port, e)
            self._drop(key)
            return None

    def _drop(self, key: tuple[str, int]) -> None:
        conn = self._conns.pop(key, None)
        if conn is not None:
            try:
                conn[1].close()
                conn[0].close()
            except OSError:
                pass

    def close(self) -> None:
        for key in list(self._conns):
            self._drop(key)
