"""``livectl audit``: what the controller decided about a topic, a partition or an admin request.

Reads the state-change log (:mod:`streaming.monitoring.audit_log`, a Parquet table partitioned by ``date``) and prints
the matching decisions oldest first: ZooKeeper writes, the partition states sent to brokers, admin results
and state-change failures, each with its time, micro-batch id and the controller's id and epoch.

Where the table is: ``--audit-dir`` (the ``audit_dir`` setting), else beside ``--checkpoint-dir``
(``<checkpoint>-audit``, default ``checkpoints/livectl-audit``). A local path or ``file:`` URI is read with
pyarrow; any other URI (``hdfs://``, ``s3a://``…) with a local SparkSession (Hadoop's FileSystem for the
URI, as the controller writes it; the Hadoop client for the scheme must be on Spark's classpath).

Exit codes: 0 (also when nothing matches), 1 no table at that location, 2 invalid input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

#: the help page's description: the module docstring's content without its reST markup
DESCRIPTION = """\
Reads the state-change log (a Parquet table partitioned by date) and prints the matching decisions oldest
first: ZooKeeper writes, the partition states sent to brokers, admin results and state-change failures,
each with its time, micro-batch id and the controller's id and epoch.

Where the table is: --audit-dir (the audit_dir setting), else beside --checkpoint-dir (<checkpoint>-audit,
default checkpoints/livectl-audit). A local path or file: URI is read with pyarrow; any other URI (hdfs://,
s3a://, ...) with a local SparkSession (the Hadoop client for the scheme must be on Spark's classpath).

Exit codes: 0 (also when nothing matches), 1 no table at that location, 2 invalid input."""

EXIT_OK = 0
EXIT_NO_TABLE = 1
EXIT_USAGE = 2

DEFAULT_CHECKPOINT = "checkpoints/livectl"
KINDS = ("zk_write", "request", "admin_result", "state_change_failure")
_RELATIVE = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class AuditUsageError(ValueError):
    """An option's value is invalid; ``option`` names it."""

    def __init__(self, option: str, reason: str) -> None:
        self.option = option
        super().__init__(f"{option}: {reason}")


def parse_since(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """``--since``: an ISO date or time (``2026-11-23``, ``2026-11-23T10:00``, with or without an offset;
    UTC when none) or an age (``30s``, ``10m``, ``2h``, ``7d``). Returns an aware UTC time."""
    now = now or dt.datetime.now(dt.UTC)
    m = _RELATIVE.match(text.strip())
    if m is not None:
        return now - dt.timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        t = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise AuditUsageError(
            "--since", f"{text!r} is neither an ISO date/time (2026-11-23T10:00Z) nor an age (10m, 2h, 7d)"
        ) from None
    return t.astimezone(dt.UTC) if t.tzinfo else t.replace(tzinfo=dt.UTC)


def audit_location(audit_dir: str | None, checkpoint_dir: str | None) -> str:
    if audit_dir:
        return audit_dir
    return (checkpoint_dir or DEFAULT_CHECKPOINT).rstrip("/") + "-audit"


def _is_local(uri: str) -> bool:
    return uri.startswith("file:") or "://" not in uri


def _local_path(uri: str) -> str:
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if uri.startswith("file:"):
        return uri[len("file:") :]
    return uri


def read_local(
    path: str,
    *,
    topic: str | None = None,
    partition: int | None = None,
    request_id: str | None = None,
    since: dt.datetime | None = None,
    kind: str | None = None,
) -> list[dict[str, Any]]:
    """Matching rows of the table at local ``path`` (pyarrow), oldest first; ``FileNotFoundError`` when
    there is no table there."""
    import os

    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    if not os.path.isdir(path):
        raise FileNotFoundError(path)
    dataset = ds.dataset(path, format="parquet", partitioning="hive")
    cond: Any = None

    def both(a: Any, b: Any) -> Any:
        return b if a is None else a & b

    if topic is not None:
        cond = both(cond, pc.field("topic") == topic)
    if partition is not None:
        cond = both(cond, pc.field("partition") == partition)
    if request_id is not None:
        cond = both(cond, pc.field("request_id") == request_id)
    if kind is not None:
        cond = both(cond, pc.field("kind") == kind)
    if since is not None:
        cond = both(cond, pc.field("time") >= since)
        if "date" in dataset.schema.names:
            # prune whole days by the partition folder (its type as pyarrow inferred it)
            day = since.date()
            t = dataset.schema.field("date").type
            cond = both(cond, pc.field("date") >= (day.isoformat() if str(t) == "string" else day))
    table = dataset.to_table(filter=cond)
    rows: list[dict[str, Any]] = table.sort_by(
        [("time", "ascending"), ("batch_id", "ascending"), ("seq", "ascending")]
    ).to_pylist()
    return rows


def read_spark(
    uri: str,
    *,
    topic: str | None = None,
    partition: int | None = None,
    request_id: str | None = None,
    since: dt.datetime | None = None,
    kind: str | None = None,
) -> list[dict[str, Any]]:
    """The same as :func:`read_local`, through a local SparkSession (any Hadoop file system)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.master("local[1]").appName("livectl audit").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = spark.read.parquet(uri)
    except AnalysisException as e:
        # Spark's own answer for a table that is not there (its error condition, not a message to parse)
        if e.getCondition() == "PATH_NOT_FOUND":
            raise FileNotFoundError(uri) from None
        raise
    if topic is not None:
        df = df.where(F.col("topic") == topic)
    if partition is not None:
        df = df.where(F.col("partition") == partition)
    if request_id is not None:
        df = df.where(F.col("request_id") == request_id)
    if kind is not None:
        df = df.where(F.col("kind") == kind)
    if since is not None:
        df = df.where(F.col("date") >= F.lit(since.date())).where(F.col("time") >= F.lit(since))
    rows = [r.asDict(recursive=True) for r in df.orderBy("time", "batch_id", "seq").collect()]
    for r in rows:
        if isinstance(r.get("time"), dt.datetime) and r["time"].tzinfo is None:
            # Spark hands back session-local naive times: make them UTC
            r["time"] = r["time"].astimezone(dt.UTC)
    return rows


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dt.datetime):
            out[k] = v.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        elif isinstance(v, dt.date):
            out[k] = v.isoformat()
        else:
            out[k] = v
    return out


def format_row(row: dict[str, Any]) -> str:
    """One line: ``time batch B cID eE kind action [topic-partition] outcome [brokers] [request id] detail``."""
    r = _jsonable(row)
    where = ""
    if r.get("topic") is not None:
        where = r["topic"] if r.get("partition") is None else f"{r['topic']}-{r['partition']}"
    parts = [
        r["time"],
        f"batch {r['batch_id']}",
        f"c{r['controller_id']} e{r['controller_epoch']}",
        r["kind"],
        r["action"],
    ]
    if where:
        parts.append(where)
    parts.append(r["outcome"])
    if r.get("brokers"):
        parts.append("brokers " + ",".join(str(b) for b in r["brokers"]))
    if r.get("request_id"):
        parts.append(f"request {r['request_id']}")
    if r.get("error"):
        parts.append(f"error {r['error']}")
    if r.get("path") and r["kind"] == "zk_write":
        parts.append(r["path"])
    if r.get("detail"):
        parts.append(r["detail"])
    return " ".join(str(p) for p in parts)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "audit",
        help="what the controller decided (the state-change log)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--topic", help="only decisions about this topic")
    p.add_argument("--partition", type=int, help="only this partition (with --topic)")
    p.add_argument("--request-id", help="only the result of this admin request")
    p.add_argument("--kind", choices=KINDS, help="only decisions of this kind")
    p.add_argument("--since", help="only decisions at or after: ISO date/time (UTC unless an offset) or age (10m, 2h)")
    p.add_argument("--limit", type=int, default=0, help="only the newest N matching decisions (0: all)")
    p.add_argument("--output", choices=["text", "json"], default="text", help="text lines or a JSON array")
    p.add_argument("--audit-dir", help="the table's location (setting audit_dir)")
    p.add_argument("--checkpoint-dir", help=f"the controller's checkpoint (default {DEFAULT_CHECKPOINT})")
    p.set_defaults(func=cmd_audit)


def cmd_audit(args: argparse.Namespace) -> int:
    try:
        if args.partition is not None and not args.topic:
            raise AuditUsageError("--partition", "needs --topic")
        if args.partition is not None and args.partition < 0:
            raise AuditUsageError("--partition", f"must be at least 0, got {args.partition}")
        if args.limit < 0:
            raise AuditUsageError("--limit", f"must be at least 0, got {args.limit}")
        since = parse_since(args.since) if args.since else None
    except AuditUsageError as e:
        print(f"livectl audit: {e}", file=sys.stderr)
        return EXIT_USAGE
    where = audit_location(args.audit_dir, args.checkpoint_dir)
    read = read_local if _is_local(where) else read_spark
    target = _local_path(where) if _is_local(where) else where
    try:
        rows = read(
            target, topic=args.topic, partition=args.partition, request_id=args.request_id, since=since, kind=args.kind
        )
    except FileNotFoundError:
        print(f"livectl audit: no state-change log at {where}", file=sys.stderr)
        return EXIT_NO_TABLE
    if args.limit:
        rows = rows[-args.limit :]
    if args.output == "json":
        print(json.dumps([_jsonable(r) for r in rows], indent=1))
    else:
        for r in rows:
            print(format_row(r))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="livectl")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result
