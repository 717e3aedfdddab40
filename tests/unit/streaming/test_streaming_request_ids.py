"""One admin record per request id in a micro-batch (:mod:`streaming.query.request_ids`), through the query's steps
without Spark: prepare → per-bucket step → dispatch to the in-memory sinks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shell_pipeline import ADMIN, Pipeline

from core import events as ev
from core.codec.events import event_to_json
from streaming.query.validation import InputValidator

pytestmark = pytest.mark.unit


def test_every_admin_record_is_answered_once_or_refused_for_its_reused_request_id(
    tmp_path: Path, validator: InputValidator
) -> None:
    """Issue 41: 228 admin records sharing 114 request ids got 119 results. Each id's first record is
    applied and answered once; each later record of the batch with that id is refused on livectl.rejected,
    naming ``request_id``, applied nowhere and not answered under the other record's id — whether it goes to
    the first record's bucket (the same topic) or to another one."""
    p = Pipeline.failed_over(tmp_path, validator)
    zk = p.zk
    n = 114
    first = [(ADMIN, event_to_json(ev.CreateTopic(f"rid-{i}", f"t{i}", 1, 1))) for i in range(n)]
    # the reuses: even ids on the first record's own topic (its bucket), odd ones on a topic of their own
    again = [
        (ADMIN, event_to_json(ev.CreateTopic(f"rid-{i}", f"t{i}" if i % 2 == 0 else f"u{i}", 2, 1))) for i in range(n)
    ]
    half = n // 2
    items = first[:half] + again[:half] + first[half:] + again[half:]
    admin_start = p.offsets[ADMIN]
    p.run_batch(items)

    results = [m.value_json() for m in p.requests.messages if m.topic == "livectl.admin-results"]
    rejected = [m.value_json() for m in p.requests.messages if m.topic == "livectl.rejected"]
    assert sorted(r["request_id"] for r in results) == sorted(f"rid-{i}" for i in range(n)), "one answer per id"
    assert all(r["status"] == "ok" for r in results), [r for r in results if r["status"] != "ok"][:3]
    # where each reusing record sits on the admin topic
    offsets = {json.loads(v)["request_id"]: admin_start + k for k, (t, v) in enumerate(items) if (t, v) in again}
    assert sorted(r["source"]["offset"] for r in rejected) == sorted(offsets.values()), "each reuse refused once"
    for r in rejected:
        rid = json.loads(r["payload"])["request_id"]
        assert r["source"]["offset"] == offsets[rid] and r["source"]["topic"] == ADMIN
        assert any("request_id" in why and repr(rid) in why for why in r["reasons"]), r["reasons"]
    for i in range(n):  # only the first records were applied
        assert json.loads(zk.get(f"/brokers/topics/t{i}")[0])["partitions"].keys() == {"0"}
        assert not zk.exists(f"/brokers/topics/u{i}")
    assert len(results) + len(rejected) == len(items), "every record answered exactly once"
