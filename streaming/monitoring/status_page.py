"""The status page (``/`` on the metrics port): one self-contained HTML document, no scripts from elsewhere.

It shows a :class:`streaming.monitoring.observatory.Snapshot`: the cluster summary (role, controller epoch, live
brokers, Kafka's controller gauges), partitions by state, leaders per broker and the preferred-leader
imbalance as an inline SVG bar chart, the under-replicated and offline partitions, reassignments with their
progress (target replicas in the ISR, and the data moved from the brokers' log sizes: :mod:`core.move_progress`),
and the most recent decisions. The page refreshes itself every few seconds (``<meta refresh>``).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from html import escape

from core import observe
from core.kafka.log_dirs import LogDirsReport
from core.move_progress import MovingPartition, move_progress, waiting, waiting_text
from streaming.monitoring.observatory import Snapshot

REFRESH_S = 5

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.2em;color:#222;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .4em}h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}
th{background:#eee}.num{text-align:right}.bad{color:#b00020;font-weight:bold}.ok{color:#1b5e20}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{background:#fff;border:1px solid #ddd;padding:.4em .8em;min-width:9em}
.card b{display:block;font-size:1.5em}.bar{background:#ddd;width:10em;height:.8em;display:inline-block}
.bar span{background:#2e7d32;height:100%;display:block}code{font-size:.85em}
"""


def _h(text: object) -> str:
    return escape(str(text))


def _draining(s: Snapshot) -> str:
    """Each draining broker with what it still holds: ``3 (12 replicas, 2 leaders left)``."""
    c = s.cluster
    return ", ".join(
        f"{b} ({c.replicas_by_broker.get(b, 0)} replicas, {c.leaders_by_broker.get(b, 0)} leaders left)"
        for b in s.draining_brokers
    )


def _card(label: str, value: object, bad: bool = False) -> str:
    cls = ' class="bad"' if bad else ""
    return f'<div class="card" id="card-{_h(label.lower().replace(" ", "-"))}">{_h(label)}<b{cls}>{_h(value)}</b></div>'


def leaders_chart(cluster: observe.BucketSummary, live: tuple[int, ...]) -> str:
    """An SVG bar chart: per broker, the partitions it leads (bar) and the partitions it prefers (outline);
    a broker's imbalance ratio (preferred partitions led by another broker) labels its bar."""
    brokers = sorted(set(cluster.leaders_by_broker) | set(cluster.preferred_by_broker) | set(live))
    if not brokers:
        return "<p>No partitions yet.</p>"
    top = max([1, *cluster.leaders_by_broker.values(), *(t for _, t in cluster.preferred_by_broker.values())])
    bar_w, gap, height = 56, 44, 160
    width = len(brokers) * (bar_w + gap) + gap
    parts = [
        f'<svg id="leaders-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 60}" '
        f'role="img" aria-label="leaders per broker">'
    ]
    for i, b in enumerate(brokers):
        x = gap + i * (bar_w + gap)
        led = cluster.leaders_by_broker.get(b, 0)
        bad, total = cluster.preferred_by_broker.get(b, (0, 0))
        h_led = round(height * led / top)
        h_pref = round(height * total / top)
        ratio = bad / total if total else 0.0
        colour = "#2e7d32" if ratio <= 0.1 else "#c62828"
        dead = b not in live
        parts.append(
            f'<rect x="{x}" y="{20 + height - h_led}" width="{bar_w}" height="{h_led}" fill="{colour}">'
            f"<title>broker {b}: leads {led}, prefers {total}, imbalance {ratio:.0%}</title></rect>"
        )
        parts.append(
            f'<rect x="{x}" y="{20 + height - h_pref}" width="{bar_w}" height="{h_pref}" fill="none" '
            f'stroke="#333" stroke-dasharray="4 2"/>'
        )
        parts.append(
            f'<text x="{x + bar_w / 2}" y="{14 + height - max(h_led, h_pref)}" font-size="11" '
            f'text-anchor="middle">{led} led / {total} pref</text>'
        )
        label = f"broker {b}" + (" (down)" if dead else "")
        parts.append(
            f'<text x="{x + bar_w / 2}" y="{height + 36}" font-size="11" text-anchor="middle">{_h(label)}</text>'
        )
        parts.append(
            f'<text x="{x + bar_w / 2}" y="{height + 50}" font-size="11" text-anchor="middle" '
            f'fill="{colour}">imb {ratio:.0%}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _partitions_table(table_id: str, items: tuple[observe.PartitionInfo, ...], total: int) -> str:
    if not total:
        return f'<p id="{table_id}" class="ok">None.</p>'
    rows = "".join(
        f"<tr><td>{_h(p.topic)}</td><td class=num>{p.partition}</td><td>{_h(list(p.replicas))}</td>"
        f"<td class=num>{p.leader if p.leader >= 0 else 'none'}</td><td>{_h(list(p.isr))}</td></tr>"
        for p in items
    )
    more = f"<p>… {total - len(items)} more.</p>" if total > len(items) else ""
    return (
        f'<table id="{table_id}"><tr><th>topic</th><th>partition</th><th>replicas</th><th>leader</th><th>ISR</th></tr>'
        f"{rows}</table>{more}"
    )


def _reassignments_table(
    items: tuple[observe.ReassignmentInfo, ...],
    total: int,
    log_dirs: tuple[LogDirsReport, ...],
    now_s: float,
    live: Collection[int],
) -> str:
    if not total:
        return '<p id="reassignments" class="ok">None.</p>'
    # the CLI's computation (reassign --verify / --list), on the brokers' recent DescribeLogDirs reports
    moving = [MovingPartition(r.topic, r.partition, r.leader, r.adding, r.target, r.isr) for r in items if r.adding]
    parts, totals = move_progress(moving, log_dirs, int(now_s * 1000), live=live)
    data = {(p.topic, p.partition): p.text() for p in parts}
    for r in items:  # nothing to copy (only removing): what it waits for, when a broker it needs is not alive
        waiting_for, not_alive = waiting(r.target, r.isr, live)
        if (r.topic, r.partition) not in data and not_alive:
            data[(r.topic, r.partition)] = f"nothing to copy; {waiting_text(waiting_for, not_alive)}"
    rows = "".join(
        f"<tr><td>{_h(r.topic)}</td><td class=num>{r.partition}</td><td>{_h(list(r.target))}</td>"
        f"<td>{_h(list(r.adding))}</td><td>{_h(list(r.removing))}</td><td>{_h(list(r.isr))}</td>"
        f'<td><span class="bar"><span style="width:{r.percent}%"></span></span> {r.percent}%</td>'
        f"<td>{_h(data.get((r.topic, r.partition), 'nothing to copy'))}</td></tr>"
        for r in items
    )
    listed = f"the {len(items)} partitions listed" if total > len(items) else "all"
    more = f"<p>… {total - len(items)} more.</p>" if total > len(items) else ""
    return (
        '<table id="reassignments"><tr><th>topic</th><th>partition</th><th>target</th><th>adding</th>'
        "<th>removing</th><th>ISR</th><th>progress (target in ISR)</th>"
        f"<th>data (brokers' log sizes, DescribeLogDirs)</th></tr>{rows}</table>{more}"
        f'<p id="reassignment-data">Data, {listed}: {_h(totals.text())}.</p>'
    )


def _bound(bound: int) -> str:
    return "no bound on the leaders one pass moves" if bound >= 2**31 - 1 else f"at most {bound} per pass"


def render(s: Snapshot) -> str:
    """The whole page."""
    k, f = s.kafka_metrics, s.figures
    c = s.cluster
    since = f"{s.now_s - s.last_batch_time_s:.0f} s ago" if s.last_batch_id >= 0 else "never"
    role = s.role.value
    cards = "".join(
        [
            _card("Role", role, bad=s.role.value in ("fenced", "stopped")),
            _card("Controller epoch", s.controller_epoch),
            _card("Live brokers", len(s.live_brokers)),
            _card("Cordoned", ", ".join(map(str, s.cordoned_brokers)) or "none"),
            _card("Draining", _draining(s) or "none"),
            _card("Topics", k["GlobalTopicCount"]),
            _card("Partitions", k["GlobalPartitionCount"]),
            _card("Offline", f["OfflinePartitionsCount"], bad=f["OfflinePartitionsCount"] > 0),
            _card("Under-replicated", f["UnderReplicatedPartitions"], bad=f["UnderReplicatedPartitions"] > 0),
            _card("Under min ISR", f["UnderMinIsrPartitionCount"], bad=f["UnderMinIsrPartitionCount"] > 0),
            _card("Preferred imbalance", f["PreferredReplicaImbalanceCount"]),
            _card("Leader moves left", s.leader_moves_left),
            _card("Reassigning", f["ReassigningPartitions"]),
            _card("Topics to delete", k["TopicsToDeleteCount"]),
        ]
    )
    states = "".join(
        f"<tr><td>{_h(st)}</td><td class=num>{n}</td></tr>" for st, n in sorted(c.partitions_by_state.items())
    )
    decisions = "".join(
        f"<tr><td>{time.strftime('%H:%M:%S', time.gmtime(d.time_s))}</td><td class=num>{d.batch_id}</td>"
        f"<td>{_h(d.kind)}</td><td><code>{_h(d.text)}</code></td></tr>"
        for d in reversed(s.recent)
    )
    kafka_rows = "".join(f"<tr><td>{_h(name)}</td><td class=num>{v}</td></tr>" for name, v in k.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="{REFRESH_S}">
<title>livectl controller {s.controller_id} ({role})</title><style>{_CSS}</style></head>
<body>
<h1>livectl controller {s.controller_id}: <span id="role">{_h(role)}</span></h1>
<p id="summary">controller epoch {s.controller_epoch} · live brokers {_h(list(s.live_brokers))} ·
last micro-batch {s.last_batch_id} ({since}) · <a href="/metrics">/metrics</a></p>
<div class="cards">{cards}</div>
<h2>Partitions by state</h2>
<table id="partition-states"><tr><th>state</th><th>partitions</th></tr>{states}</table>
<h2>Leaders per broker and preferred-leader imbalance</h2>
<p>Bars: partitions led; dashed outline: partitions the broker is the preferred leader of; imb: share of those
led by another broker.</p>
{leaders_chart(c, s.live_brokers)}
<p id="leader-moves">Preferred-leader moves left: {s.leader_moves_left}; last pass: {s.leader_moves_last_pass};
{_bound(s.leader_moves_bound)} (<code>leader.imbalance.max.leaders.per.interval</code>).</p>
<h2>Under-replicated partitions ({f["UnderReplicatedPartitions"]})</h2>
{_partitions_table("under-replicated", c.under_replicated, f["UnderReplicatedPartitions"])}
<h2>Offline partitions ({f["OfflinePartitionsCount"]})</h2>
{_partitions_table("offline", c.offline, f["OfflinePartitionsCount"])}
<h2>Reassignments in progress ({f["ReassigningPartitions"]})</h2>
{_reassignments_table(c.reassignments, f["ReassigningPartitions"], s.log_dirs, s.now_s, s.live_brokers)}
<h2>Kafka controller metrics</h2>
<table id="kafka-metrics"><tr><th>metric</th><th>value</th></tr>{kafka_rows}</table>
<h2>Last decisions</h2>
<table id="decisions"><tr><th>time (UTC)</th><th>batch</th><th>kind</th><th>decision</th></tr>{decisions}</table>
</body></html>
"""
