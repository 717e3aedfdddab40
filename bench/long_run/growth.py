"""Growth per hour: least-squares slopes over windows and within each process's life."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.long_run.records import Sample, Window


def percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The least-squares slope of ``ys`` over ``xs`` (``None`` with fewer than two distinct ``xs``)."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def window_growth(windows: Sequence[Window], warmup: int, window_seconds: float) -> dict[str, float | None]:
    """Per ``role.metric``: the slope per hour of the per-window figures over the windows after ``warmup``."""
    after = list(windows[warmup:])
    keys = sorted({(r, k) for w in after for r, v in w.roles.items() for k in v if k != "processes"})
    out: dict[str, float | None] = {}
    for r, k in keys:
        pts = [((w.start + w.end) / 2 / 3600, w.roles[r][k]) for w in after if r in w.roles]
        s = slope([p[0] for p in pts], [p[1] for p in pts])
        out[f"{r}.{k}"] = None if s is None else round(s, 1)
    for k in ("p50_s", "p99_s"):
        pts2 = [((w.start + w.end) / 2 / 3600, float(getattr(w, k))) for w in after if getattr(w, k) is not None]
        s = slope([p[0] for p in pts2], [p[1] for p in pts2])
        out[f"latency.{k}"] = None if s is None else round(s, 2)
    return out


def within_process_growth(samples: Sequence[Sample], warmup_s: float) -> dict[str, dict[str, Any]]:
    """Per process kind (and, for the controllers, role): the memory growth (MiB per hour) within each
    process's life, pooled: the least-squares slope with an intercept of each process's own, over the samples
    after the first ``warmup_s`` seconds of it (in that role)."""
    groups: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    for s in samples:
        for key, u in s.processes.items():
            groups.setdefault(key, []).append((s.t / 3600, u.rss_kib / 1024))
    by_kind: dict[str, list[list[tuple[float, float]]]] = {}
    for (kind, _, role), pts in groups.items():
        kept = [p for p in pts if p[0] - pts[0][0] >= warmup_s / 3600]
        if len(kept) >= 2:
            name = kind if kind == "broker" else f"{kind}_{role}"
            by_kind.setdefault(name, []).append(kept)
    out: dict[str, dict[str, Any]] = {}
    for name, series in sorted(by_kind.items()):
        sxy = sxx = 0.0
        for pts in series:
            mx = statistics.fmean(p[0] for p in pts)
            my = statistics.fmean(p[1] for p in pts)
            sxy += sum((x - mx) * (y - my) for x, y in pts)
            sxx += sum((x - mx) ** 2 for x, _ in pts)
        out[name] = {
            "mib_per_hour": round(sxy / sxx, 1) if sxx else None,
            "processes": len(series),
            "samples": sum(len(p) for p in series),
            "hours_fitted": round(sum(p[-1][0] - p[0][0] for p in series), 3),
        }
    return out
