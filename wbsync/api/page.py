"""The status page at ``/``: server-rendered HTML that reloads itself every few seconds.

No template engine and no build step: small functions build the markup, and every value that
comes from data passes through ``html.escape``. The key handling is in ``wbsync.api.auth``.
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from wbsync.api.auth import COOKIE, SESSION_TTL_S, key_matches, new_session, require_page_key
from wbsync.api.deps import RuntimeDep
from wbsync.api.problems import Problem
from wbsync.api.schemas import BucketOut, JobOut
from wbsync.api.status import Snapshot, snapshot
from wbsync.jobs.queue import LIVE_STATES
from wbsync.syncs import SYNCS

__all__ = ["REFRESH_S", "render", "router"]

REFRESH_S = 5
_STATES = (*LIVE_STATES, "completed", "failed")

router = APIRouter(tags=["status page"])

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#1d2430;background:#f6f7f9}
h1{font-size:1.4rem;margin:0 0 .2rem}h2{font-size:1.05rem;margin:1.6rem 0 .5rem}
.meta{color:#667;margin-bottom:1rem}
.tiles{display:flex;gap:.8rem;flex-wrap:wrap}
.tile{background:#fff;border:1px solid #dde;border-radius:6px;padding:.6rem 1rem;min-width:9rem}
.tile b{display:block;font-size:1.5rem}
table{border-collapse:collapse;background:#fff;border:1px solid #dde;min-width:40%}
th,td{padding:.3rem .7rem;border-bottom:1px solid #eef;text-align:left;white-space:nowrap}
th{background:#eef1f6;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.zero{color:#bbb}.delayed{color:#a15c00;font-weight:600}.active{color:#0a7d32;font-weight:600}
.failed{color:#b3261e;font-weight:600}.waiting,.prioritized{color:#2457a6}
td.jobs{white-space:normal;max-width:52rem}
.job{display:inline-block;white-space:nowrap;margin:.1rem .4rem .1rem 0;padding:.05rem .45rem;
border-radius:4px;background:#f0f2f6}.empty{color:#889;font-style:italic}
"""


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def status_page(
    request: Request, runtime: RuntimeDep, key: Annotated[str | None, Query()] = None
) -> Response:
    """The status page; ``?key=`` trades the key for a session cookie and redirects to ``/``."""
    if key is not None:
        if not key_matches(key, request.app.state.api_keys):
            raise Problem(401, "unauthorized", "Unauthorized", "that key is not valid")
        response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
        response.set_cookie(
            COOKIE,
            new_session(key),
            max_age=SESSION_TTL_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response
    require_page_key(request)
    return HTMLResponse(render(await snapshot(runtime)), headers={"Cache-Control": "no-store"})


def _ago(ms: int | None) -> str:
    if ms is None:
        return "?"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _time(at: datetime | None, *, ms: bool = True) -> str:
    if at is None:
        return "—"
    return (at.strftime("%H:%M:%S.%f")[:-3] if ms else at.strftime("%H:%M:%S")) + " UTC"


def _table(head: list[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f'<p class="empty">{escape(empty)}</p>'
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(rows_cells) + "</tr>" for rows_cells in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _td(text: object, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{escape(str(text))}</td>"


def _num(n: float) -> str:
    return _td(f"{n:g}", "n zero" if n == 0 else "n")


def _tiles(snap: Snapshot) -> str:
    live = sum(by[s] for by in snap.queues.values() for s in LIVE_STATES)
    delayed = sum(by["delayed"] for by in snap.queues.values())
    tiles = [
        ("live jobs", live),
        ("delayed (waiting on a window)", delayed),
        ("deferrals (reschedules)", snap.counters["reschedules"]),
        ("429s from WB", snap.counters["upstream_429"]),
        ("local 429s (past the ceiling)", snap.counters["local_429"]),
    ]
    return (
        '<div class="tiles">'
        + "".join(
            f'<div class="tile"><b>{value:g}</b>{escape(label)}</div>' for label, value in tiles
        )
        + "</div>"
    )


def _waiting(snap: Snapshot) -> str:
    rows = [
        [
            _td(f"{c.name} (#{c.id})"),
            _td(j.queue),
            _td(j.deferred_by or "—", "delayed"),
            _td(_time(j.resume_at)),
            _td(_ago(j.resume_in_ms), "n"),
            _num(j.deferrals),
        ]
        for c, j in snap.waiting
    ]
    head = ["cabinet", "queue", "waits for window", "resumes at", "in", "deferrals"]
    return _table(head, rows, "no job is waiting on a rate-limit window")


def _queues(snap: Snapshot) -> str:
    rows = [
        [
            _td(name),
            _td("long" if SYNCS[name].long else "short"),
            *(_num(counts.get(s, 0)) for s in _STATES),
        ]
        for name, counts in snap.queues.items()
    ]
    return _table(["queue", "kind", *_STATES], rows, "no queues")


def _job(job: JobOut) -> str:
    text = f"{job.queue}: {job.state}"
    if job.state == "delayed":
        text += f" on {job.deferred_by or '?'} until {_time(job.resume_at, ms=False)}"
    if job.deferrals:
        text += f" · {job.deferrals} deferral{'s' if job.deferrals != 1 else ''}"
    return f'<span class="job {escape(job.state)}">{escape(text)}</span>'


def _cabinets(snap: Snapshot) -> str:
    rows = [
        [
            _td(c.cabinet.id, "n"),
            _td(c.cabinet.name),
            _td(c.cabinet.seller_id),
            _td("yes" if c.cabinet.active else "no"),
            '<td class="jobs">'
            + ("".join(_job(j) for j in c.jobs) or '<span class="empty">idle</span>')
            + "</td>",
        ]
        for c in snap.cabinets
    ]
    return _table(["id", "name", "seller", "active", "live jobs"], rows, "no cabinets yet")


def _bucket_row(cabinet: str, b: BucketOut) -> list[str]:
    return [
        _td(cabinet),
        _td(b.group),
        _td(f"{b.tokens_left} / {b.capacity}", "n"),
        _td("now" if b.next_token_in_ms == 0 else _ago(b.next_token_in_ms), "n"),
        _td(f"{b.limit.limit} per {b.limit.period_s:g} s"),
    ]


def _buckets(snap: Snapshot) -> str:
    rows = [_bucket_row(name, b) for name, b in snap.buckets]
    head = ["cabinet", "limit group", "tokens left", "next token", "WB limit (unscaled)"]
    return _table(head, rows, f"every bucket of {snap.buckets_of} active cabinets is full")


def render(snap: Snapshot) -> str:
    """The whole page for ``snap``."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_S}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wbsync status</title><style>{_CSS}</style></head>
<body>
<h1>wbsync status</h1>
<div class="meta">as of {escape(_time(snap.generated_at))} · time scale {snap.time_scale:g}
 · reloads every {REFRESH_S} s</div>
{_tiles(snap)}
<h2>Waiting on rate-limit windows</h2>
{_waiting(snap)}
<h2>Queues</h2>
{_queues(snap)}
<h2>Cabinets</h2>
{_cabinets(snap)}
<h2>Busiest buckets</h2>
{_buckets(snap)}
</body></html>
"""
