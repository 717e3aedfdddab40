"""The source's read over a slow link to Kafka (issue 41, docs/reliability.md "Degraded links"): Apache Kafka and
the reader on test hosts of their own (:mod:`bench.harness.kafka_link`, so as root), the reader's link to Kafka
through ``tc``'s token bucket filter at 256 kbit/s both ways (a two-packet queue, tail drops), a backlog of
about 280 kB behind where the read starts. The reader is driven as Spark drives it: ``read`` again and again
from the offset the last one returned.

A fetch answer comes whole or not at all, and one not come within the request timeout closes the
connection and is asked again. Asking for the whole backlog in one answer (1 MiB per partition, as the read
did) never finished at this rate: with the request timeout at 10 s here (30 s by default) the read got
nothing at all. The fetch size now goes back to 16 KiB when records wait and none come, and grows again as
answers come quickly (:mod:`streaming.source.fetch_size`).

The second test is what the read working over a slow link then showed: the data-loss check of a start one record
on took an old high watermark for the log's end (a data loss that was not there)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness.kafka_link import kafka_and_a_reader

pytestmark = pytest.mark.integration

#: the records behind the read's start, about 280 bytes each, on the first of two topics (the controller reads
#: two: admin and broker events); the second holds a few, as the admin topic does
BACKLOG = 1000
#: the clients' request timeout: a third of the default so that the test is short; the fetch size's rules
#: are fractions of it
REQUEST_TIMEOUT_MS = 10_000
#: how long the reader may take: the fetch size falls back after a third of the request timeout of polls
#: bringing nothing, then the backlog comes at the link's rate (about 16 kB/s through the drops)
READ_WITHIN_S = 45

_READ = """
import json, sys, time
from streaming.source.kafka_source import KafkaStreamReader
from streaming.source.options import SourceOptions
bootstrap, want, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
reader = KafkaStreamReader(SourceOptions.parse({
    "bootstrap_servers": bootstrap, "topics": "events,admin", "request_timeout_ms": sys.argv[4],
    "first_read_wait_ms": "0",
}))
offset = {"admin": {"0": 0}, "events": {"0": 100}}
got, began = 0, time.monotonic()
while got < want and time.monotonic() - began < seconds:
    rows, offset = reader.read(offset)
    got += len(list(rows))
print(json.dumps({"read": got, "seconds": round(time.monotonic() - began, 1), "fetch_bytes": reader.kafka.fetch.bytes,
                  "stalls": reader.kafka.fetch.stalls, "grown": reader.kafka.fetch.grown}), flush=True)
reader.stop()
"""


def test_the_read_gets_its_backlog_over_a_link_too_slow_for_one_answer(tmp_path: Path) -> None:
    topics = {
        # 100 records read before, then the backlog
        "events": [json.dumps({"i": i, "pad": "p" * 250}).encode() for i in range(100 + BACKLOG)],
        "admin": [json.dumps({"command": i}).encode() for i in range(5)],
    }
    with kafka_and_a_reader(tmp_path / "kafka", topics) as link:
        link.degrade("256kbit")
        want = BACKLOG + 5
        argv = [link.kafka.bootstrap, str(want), str(READ_WITHIN_S), str(REQUEST_TIMEOUT_MS)]
        done = link.reader.run([sys.executable, "-c", _READ, *argv], timeout=READ_WITHIN_S + 60)
        assert done.returncode == 0, done.stderr[-2000:]
        shaped = link.shaped()
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(result, shaped)  # the figures docs/reliability.md quotes (pytest -s)
    # before: the answer of about 280 kB needs some 17 s at this rate, more than the request timeout, so it was
    # asked again and again and the read got 0 records
    assert result["read"] == want, f"{result}; tbf {shaped}"
    assert result["stalls"] >= 1, result  # the first answer asked for (1 MiB) did not come: the size fell back
    assert shaped["in"]["drops"] > 0, shaped  # the link was lossy, not only slow


_CHECK_AFTER_A_READ = """
import sys, time
from kafka import KafkaProducer, TopicPartition
from streaming.source.consumer import SourceConsumer
from streaming.source.options import KafkaSourceError, SourceOptions
bootstrap = sys.argv[1]
sc = SourceConsumer(SourceOptions(bootstrap_servers=bootstrap, topics=("t",)))
tps = sc.partitions()
# the check of the read's start, 4, on a clean link: its answer tells the high watermark, 4
assert not sc.check_data_loss(tps, {("t", 0): 4}, {})[2]
p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
p.send("t", b"x" * 3000).get(30)  # the record at offset 4, which the read then reads: its start is 5
p.close()
print("degrade", flush=True)
assert sys.stdin.readline().strip() == "go"
deadline = time.monotonic() + 30
try:
    while sc.check_data_loss(tps, {("t", 0): 5}, {})[2]:
        assert time.monotonic() < deadline, "unchecked for 30 s"
    print("checked", flush=True)
except KafkaSourceError as e:
    print("lost:", e.reason, flush=True)
"""


def test_the_check_of_a_later_start_over_a_slow_link_finds_no_loss(tmp_path: Path) -> None:
    """The data-loss check's consumer keeps its partitions assigned between checks, so a partition's high
    watermark stays the one of its last answer, at the earlier start. Over a slow link the answer at the new
    start (a 3 kB record) comes after the check's first poll; the old high watermark then said the log ended
    before the new start: a data loss that was not there, which stopped the controller in ``kafka-degraded``
    (``the checkpoint reads from offset 5 but the log now ends at offset 4``)."""
    with kafka_and_a_reader(tmp_path / "kafka", {"t": [f"record {i}".encode() for i in range(4)]}) as link:
        proc = subprocess.Popen(
            link.reader.command([sys.executable, "-c", _CHECK_AFTER_A_READ, link.kafka.bootstrap]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline().strip() == "degrade", proc.stderr and proc.stderr.read()[-2000:]
            link.degrade("32kbit")
            proc.stdin.write("go\n")
            proc.stdin.flush()
            out, err = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert proc.returncode == 0, err[-2000:]
    assert out.strip() == "checked", out
