"""The status page: the fleet (``/``) and one cluster (``/clusters/{namespace}/{name}``) as plain
server-rendered HTML, from the same documents as the JSON API (rayscale.autoscaler.view).

Every string that comes from the documents (names, resources, messages) goes through
`html.escape`; the page has a little inline CSS and one short script that fetches the page again
every 2 seconds and swaps in its ``<main>`` (the Content-Security-Policy allows that script by
its hash and nothing else). Long lists are cut for the page (the JSON API has them whole).
"""

from __future__ import annotations

import base64
import hashlib
import html
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from aiohttp import web

from rayscale.autoscaler.lifecycle import ReplicaState
from rayscale.common.timefmt import parse_time, rfc3339
from rayscale.web.api import API, NO_AUTOSCALER, SERVED, autoscaler_of, view_of

__all__ = ["MAX_ROWS", "cluster_html", "error_page", "fleet_html", "routes"]

MAX_ROWS = 300  # replicas and Ray nodes listed on the page (all of them are in the JSON API)
UNBOUNDED = 2147483647  # maxReplicas of a group that sets none
BYTES = frozenset({"memory", "object_store_memory"})
STATES = tuple(str(state) for state in ReplicaState)  # the order the page lists them in
TICKS = (60, 120, 300, 600, 900, 1800, 3600)  # timeline widths, seconds
NONE = '<span class="muted">—</span>'

SCRIPT = (
    "setInterval(()=>fetch(location.href).then(r=>r.text()).then(t=>{"
    "const m=new DOMParser().parseFromString(t,'text/html').querySelector('main');"
    "if(m)document.querySelector('main').replaceWith(m);document.body.classList.remove('stale')})"
    ".catch(()=>document.body.classList.add('stale')),2000);"
)
_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
CSP = (
    f"default-src 'none'; script-src 'sha256-{_HASH}'; style-src 'unsafe-inline'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

STYLE = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2933;
 background:#f5f7fa}
header{background:#1f2933;color:#e4e7eb;padding:10px 24px;display:flex;gap:16px;align-items:baseline}
header a{color:#fff;font-weight:600;text-decoration:none;font-size:16px}
header .meta{color:#9aa5b1;margin-left:auto}
main{padding:16px 24px 32px;max-width:1280px}
.stale main{opacity:.55}
h1{font-size:20px;margin:4px 0 4px}h2{font-size:15px;margin:22px 0 8px;color:#323f4b}
h1 small,h2 small{color:#7b8794;font-weight:400}
nav{color:#7b8794;margin-bottom:4px}nav a{color:#2680c2}
a{color:#2680c2}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #e4e7eb}
th,td{padding:5px 10px;border-bottom:1px solid #e4e7eb;text-align:left;vertical-align:top}
th{background:#f0f4f8;font-weight:600;color:#52606d;font-size:12px;text-transform:uppercase;letter-spacing:.03em;
 white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.muted{color:#9aa5b1}.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
td.mono{white-space:nowrap}
.chip{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;line-height:18px;
 margin:1px 3px 1px 0;white-space:nowrap;background:#e4e7eb;color:#323f4b}
.s-requested{background:#d9e2ec;color:#334e68}.s-scheduling{background:#ffe8d9;color:#ad4e00}
.s-booting{background:#fff3c4;color:#8d6b00}.s-ready{background:#c6f7e2;color:#0b6e4f}
.s-idle{background:#dceefb;color:#0b4f8a}.s-draining{background:#eae2f8;color:#5b2ba0}
.s-failed{background:#ffe3e3;color:#ab091e}.s-removed{background:#e4e7eb;color:#616e7c}
.bad{background:#ffe3e3;color:#ab091e}.good{background:#c6f7e2;color:#0b6e4f}.warn{background:#fff3c4;color:#8d6b00}
.banner{border-left:4px solid #f0b429;background:#fffbea;padding:8px 12px;margin:10px 0}
.banner.error{border-color:#e12d39;background:#ffeeee}
.facts{display:flex;flex-wrap:wrap;gap:6px 22px;margin:6px 0 2px;color:#52606d}
.facts b{color:#1f2933;font-weight:600}
.bar{position:relative;height:14px;background:#f0f4f8;border-radius:3px;min-width:120px}
.bar span{position:absolute;top:0;bottom:0;border-radius:3px}
.usage{display:grid;grid-template-columns:repeat(auto-fill,minmax(270px,1fr));gap:8px 24px;background:#fff;
 border:1px solid #e4e7eb;padding:10px 12px}
.usage .bar{margin-top:3px}
.usage .bar span{background:#3ebd93;left:0}
td.tl{width:42%;padding-left:4px;padding-right:4px}
.tl .bar{height:16px;background:repeating-linear-gradient(90deg,#f5f7fa 0 24.9%,#e4e7eb 24.9% 25%)}
.tl .bar span.s-requested{background:#9fb3c8}.tl .bar span.s-scheduling{background:#f9703e}
.tl .bar span.s-booting{background:#f7c948}.tl .bar span.s-ready{background:#3ebd93}
.tl .bar span.s-idle{background:#47a3f3}.tl .bar span.s-draining{background:#8662c7}
.tl .bar span.s-failed{background:#e12d39}.tl .bar span.s-removed{background:#9aa5b1}
.axis{display:flex;justify-content:space-between;font-size:11px;color:#7b8794;font-weight:400;text-transform:none}
tr.gone td{color:#9aa5b1}tr.gone .chip{opacity:.6}tr.gone .bar span{opacity:.45}
ul.what{margin:0;padding-left:16px}ul.what li{margin:1px 0}
"""


# ---------------------------------------------------------------------------- formatting


def e(value: object) -> str:
    return html.escape(str(value))


def _parse(when: str | None) -> datetime | None:
    return parse_time(when) if when else None


def clock(when: str | None, now: datetime) -> str:
    """A time as HH:MM:SS (UTC; with its date when that is not `now`'s), its RFC 3339 form as a title."""
    at = _parse(when)
    if at is None:
        return NONE
    shown = at.strftime("%H:%M:%S") if at.date() == now.date() else at.strftime("%Y-%m-%d %H:%M")
    return f'<time datetime="{e(when)}" title="{e(when)}">{shown}</time>'


def age(seconds: float, *, short: bool = False) -> str:
    """``42s``, ``3m 05s``, ``2h 10m``, ``3d 4h`` (`short`: ``15m``, not ``15m 00s``)."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m" if short and not seconds % 60 else f"{seconds // 60}m {seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"


def since(when: str | None, now: datetime) -> float:
    at = _parse(when)
    return 0.0 if at is None else (now - at).total_seconds()


def amount(name: str, value: float) -> str:
    if name in BYTES:
        for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(value) >= size:
                return f"{value / size:.3g} {unit}"
        return f"{value:g} B"
    return f"{value:g}"


def resources(found: Mapping[str, float] | None) -> str:
    if not found:
        return NONE
    return " · ".join(f"{e(k)} {e(amount(k, v))}" for k, v in found.items())


def chip(text: object, cls: str = "") -> str:
    return f'<span class="chip {e(cls)}">{e(text)}</span>'


def state_chips(states: Mapping[str, int]) -> str:
    ordered = [s for s in STATES if s in states] + sorted(s for s in states if s not in STATES)
    chips = [chip(f"{states[s]} {s}", f"s-{s}") for s in ordered if states[s]]
    return "".join(chips) or '<span class="muted">none</span>'


def shape(entry: Mapping[str, Any]) -> str:
    """What one demand entry asks for: a task's resources, a placement group's bundles, a request."""
    kind = entry.get("kind")
    if kind == "placementGroup":
        bundles = ", ".join("{" + resources(b) + "}" for b in entry.get("bundles") or [])
        return f"placement group {e(entry.get('strategy'))} [{bundles}]"
    what = "{" + resources(entry.get("resources")) + "}"
    if kind == "request":
        unit = entry.get("unit")
        return f"{what} <span class=muted>request {e(unit) if unit else 'request_resources()'}</span>"
    return f"{what} <span class=muted>task/actor</span>"


def cluster_path(namespace: str, name: str, root: str = "/clusters") -> str:
    """The page's (or, with `root` API, the JSON API's) path of a cluster."""
    return f"{root}/{urllib.parse.quote(namespace, safe='')}/{urllib.parse.quote(name, safe='')}"


def _table(head: Sequence[str], rows: Iterable[str], *, empty: str = "") -> str:
    body = "".join(rows)
    if not body and empty:
        return f'<p class="muted">{e(empty)}</p>'
    cells = "".join(f'<th class="num">{h[1:]}</th>' if h.startswith("#") else f"<th>{h}</th>" for h in head)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _cut(shown: int, total: int, what: str) -> str:
    if total <= shown:
        return ""
    return f'<p class="muted">{total - shown} more {e(what)} not shown here: the JSON API lists them all.</p>'


def document(title: str, body: str, *, meta: str = "") -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{e(title)} · rayscale</title><style>{STYLE}</style></head><body>"
        '<header><a href="/">rayscale</a><span>autoscaler status</span>'
        f'<span class="meta">{meta}</span></header>'
        f"<main>{body}</main><script>{SCRIPT}</script></body></html>"
    )


def html_response(text: str, status: int = 200) -> web.Response:
    response = web.Response(text=text, status=status, content_type="text/html")
    response.headers["Content-Security-Policy"] = CSP
    response.enable_compression()
    return response


# ---------------------------------------------------------------------------- the fleet


def _group_cells(groups: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for g in groups:
        moving = g["desired"] != g["current"]
        title = f"desired {g['desired']}, current {g['current']}"
        out.append(
            f'<span class="chip{" warn" if moving else ""}" title="{e(title)}">'
            f"{e(g['name'])} {e(g['desired'])} / {e(g['current'])}</span>"
        )
    return "".join(out) or '<span class="muted">no worker group</span>'


def _unmet_chips(unmet: Mapping[str, int]) -> str:
    if not unmet:
        return chip("none", "good")
    return "".join(chip(f"{count} {reason}", "bad") for reason, count in sorted(unmet.items()))


def _gcs_chip(reachable: bool) -> str:
    return chip("reachable", "good") if reachable else chip("unreachable", "bad")


def fleet_html(entries: Sequence[Mapping[str, Any]], now: datetime) -> str:
    rows = []
    for c in entries:
        path = cluster_path(c["namespace"], c["name"])
        rows.append(
            f'<tr data-cluster="{e(c["namespace"])}/{e(c["name"])}">'
            f'<td><a href="{e(path)}"><span class="muted">{e(c["namespace"])}/</span>'
            f"<b>{e(c['name'])}</b></a></td>"
            f"<td>{_group_cells(c['groups'])}</td><td>{state_chips(c['states'])}</td>"
            f"<td>{_unmet_chips(c['unmet'])}</td><td>{_gcs_chip(c['gcsReachable'])}</td>"
            f"<td>{e(c['hold']) if c['hold'] else NONE}</td>"
            f"<td>{clock(c['lastDecisionTime'], now)} "
            f'<span class="muted">({age(since(c["lastDecisionTime"], now))} ago)</span></td></tr>'
        )
    table = _table(
        [
            "RayCluster",
            "Groups: desired / current",
            "Replicas",
            "Unmet demand",
            "GCS",
            "Hold",
            "Latest round",
        ],
        rows,
        empty="No autoscaled RayCluster yet: a RayCluster is autoscaled when its "
        "spec.enableInTreeAutoscaling is true, from its first round on.",
    )
    body = (
        f"<h1>Autoscaled RayClusters <small>({len(entries)})</small></h1>"
        '<p class="muted">What the autoscaler saw and decided in its latest round of each cluster. '
        f'JSON: <a href="{API}">{API}</a></p>{table}'
    )
    return document("RayClusters", body, meta=f"as of {clock(rfc3339(now), now)} UTC")


# ---------------------------------------------------------------------------- one cluster


def _groups(view: Mapping[str, Any], now: datetime) -> str:
    rows = []
    for g in view["groups"]:
        top = "∞" if g["maxReplicas"] >= UNBOUNDED else e(g["maxReplicas"])
        backoff = (
            f'<span class="chip bad">backing off until {clock(g["backoffUntil"], now)}</span>'
            if g["backoffUntil"]
            else ""
        )
        rows.append(
            f'<tr data-group="{e(g["name"])}"><td><b>{e(g["name"])}</b> {backoff}</td>'
            f'<td class="num">{e(g["minReplicas"])}</td><td class="num">{top}</td>'
            f'<td class="num">{e(g["numOfHosts"])}</td>'
            f'<td class="num"><b>{e(g["desired"])}</b></td><td class="num">{e(g["current"])}</td>'
            f"<td>{state_chips(g['states'])}</td><td>{resources(g['hostResources'])}</td></tr>"
        )
    return _table(
        ["Group", "#Min", "#Max", "#Hosts", "#Desired", "#Current", "Replicas by state", "One host"],
        rows,
        empty="No worker group.",
    )


def _used(name: str, used: float, total: float, *, bold: bool = False) -> str:
    label = f"<b>{e(name)}</b>" if bold else e(name)
    return f"{label} {e(amount(name, used))} / {e(amount(name, total))}"


def _usage(ray: Mapping[str, Any]) -> str:
    cells = []
    for name, u in ray["usage"].items():
        total, used = u["total"], u["used"]
        share = 0.0 if not total else min(max(used / total, 0.0), 1.0)
        cells.append(
            f"<div>{_used(name, used, total, bold=True)}"
            f'<div class="bar" title="{share:.0%} used">'
            f'<span style="width:{share * 100:.1f}%"></span></div></div>'
        )
    return f'<div class="usage">{"".join(cells)}</div>' if cells else '<p class="muted">No resources.</p>'


def _ray_nodes(ray: Mapping[str, Any]) -> str:
    nodes = ray["nodes"]
    rows = []
    for n in nodes[:MAX_ROWS]:
        used = " · ".join(_used(k, v - n["available"].get(k, 0), v) for k, v in n["total"].items())
        role = chip("head") if n["head"] else e(n["group"] or "")
        rows.append(
            f'<tr><td class="mono" title="{e(n["id"])}">{e(n["id"][:12])}</td><td>{e(n["pod"] or "")}</td>'
            f"<td>{role}</td><td>{chip(n['state'], _ray_state(n['state']))}</td>"
            f"<td>{used}</td>"
            f'<td class="num">{age(n["idleSeconds"]) if n["state"] == "IDLE" else ""}</td></tr>'
        )
    table = _table(
        ["Node", "Pod", "Group", "State", "Used / total", "#Idle for"], rows, empty="Ray has no node."
    )
    return table + _cut(len(rows), len(nodes), "Ray nodes")


def _ray_state(state: str) -> str:
    return {"RUNNING": "s-ready", "IDLE": "s-idle", "DRAINING": "s-draining", "DEAD": "s-failed"}.get(
        state, ""
    )


def _window(ages: Iterable[float]) -> int:
    oldest = max(ages, default=0.0)
    return next((t for t in TICKS if oldest <= t), TICKS[-1])


def _replicas(view: Mapping[str, Any], now: datetime) -> str:
    """Each replica a row: its state since when, as a bar on a shared time axis ending now."""
    order = {s: i for i, s in enumerate(STATES)}
    replicas = sorted(
        view["replicas"],
        key=lambda r: (r["gone"], r["group"], order.get(r["state"], len(STATES)), r["since"]),
    )
    shown = replicas[:MAX_ROWS]
    ages = [since(r["since"], now) for r in shown]
    width = _window(ages)
    rows = []
    for r, seconds in zip(shown, ages, strict=True):
        left = max(0.0, 100.0 - seconds / width * 100.0)
        extra = []
        if r["cause"]:
            extra.append(chip(r["cause"], "bad" if r["state"] == "failed" else ""))
        if r["message"]:
            extra.append(f'<span class="muted">{e(r["message"])}</span>')
        if r["idleSince"]:
            extra.append(f'<span class="muted">idle since {clock(r["idleSince"], now)}</span>')
        pods = r["pods"]
        title = "pods: " + ", ".join(pods) if pods and pods != [r["replica"]] else r["replica"]
        rows.append(
            f'<tr class="replica{" gone" if r["gone"] else ""}" data-replica="{e(r["replica"])}" '
            f'data-state="{e(r["state"])}" data-gone="{str(r["gone"]).lower()}">'
            f"<td>{e(r['group'])}</td>"
            f'<td class="mono" title="{e(title)}">{e(r["replica"])}</td>'
            f"<td>{chip(r['state'], 's-' + r['state'])} {' '.join(extra)}</td>"
            f'<td>{clock(r["since"], now)}</td><td class="num">{age(seconds)}</td>'
            f'<td class="tl"><div class="bar"><span class="s-{e(r["state"])}" '
            f'style="left:{left:.2f}%;right:0"></span></div></td></tr>'
        )
    ticks = "".join(f"<span>&minus;{age(width * q // 4, short=True)}</span>" for q in (4, 3, 2, 1))
    axis = f'<div class="axis">{ticks}<span>now</span></div>'
    table = _table(
        ["Group", "Replica", "State", "Since", "#For", f"In its state since {axis}"],
        rows,
        empty="No worker replica.",
    )
    return table + _cut(len(rows), len(replicas), "replicas")


def _demand(view: Mapping[str, Any]) -> str:
    demand = view["demand"]
    unmet = [
        f'<tr><td>{shape(u)}</td><td class="num">{e(u["count"])}</td>'
        f"<td>{chip(u['reason'], 'bad')}</td><td>{e(u['why'])}</td></tr>"
        for u in demand["unmet"]
    ]
    pending = [f'<tr><td>{shape(p)}</td><td class="num">{e(p["count"])}</td></tr>' for p in demand["pending"]]
    out = "<h2>Unmet demand</h2>" + _table(
        ["What", "#Count", "Reason", "Why"], unmet, empty="None: every pending demand fits."
    )
    out += "<h2>Pending demand</h2>" + _table(
        ["What", "#Count"], pending, empty="None: Ray and the RayResourceRequests ask for nothing more."
    )
    if demand["pendingOmitted"]:
        out += f'<p class="muted">and {e(demand["pendingOmitted"])} more shapes.</p>'
    return out


def _decision(index: int, d: Mapping[str, Any], path: str, now: datetime) -> str:
    what = []
    for x in d["launched"]:
        why = "; ".join(x["why"])
        what.append(f"<li>{chip('launched', 'good')} {e(x['group'])} +{e(x['replicas'])}: {e(why)}</li>")
    for x in d["removed"]:
        unit = x["pod"] if x["replica"] in (None, x["pod"]) else f"{x['replica']} ({x['pod']})"
        what.append(f"<li>{chip('removed', 's-draining')} {e(x['group'])} {e(unit)}: {e(x['cause'])}</li>")
    for u in d["unmet"]:
        what.append(
            f"<li>{chip('unmet', 'bad')} {e(u['count'])} &times; {shape(u)}: "
            f"{e(u['reason'])}, {e(u['why'])}</li>"
        )
    if d["held"]:
        what.append(f"<li>{chip('held', 'warn')} {e(d['held'])}</li>")
    if d["omitted"]:
        left = ", ".join(f"{n} {k}" for k, n in sorted(d["omitted"].items()))
        what.append(f'<li class="muted">left out: {e(left)}</li>')
    if not what:
        what.append('<li class="muted">nothing to change</li>')
    repeats = (
        f'<br><span class="muted">&times;{e(d["repeats"] + 1)}, until {clock(d["lastSeen"], now)}</span>'
        if d["repeats"]
        else ""
    )
    scenario = f'<a href="{e(path)}/decisions/{index}/scenario">scenario</a>' if d["scenario"] else NONE
    return (
        f'<tr data-decision="{index}"><td>{clock(d["time"], now)}{repeats}</td><td>{e(d["trigger"])}</td>'
        f'<td><ul class="what">{"".join(what)}</ul></td>'
        f"<td>{chip('patched', 'good') if d['written'] else '<span class=muted>no</span>'}</td>"
        f"<td>{scenario}</td></tr>"
    )


def cluster_html(view: Mapping[str, Any], now: datetime) -> str:
    ns, name = view["namespace"], view["name"]
    api_path = cluster_path(ns, name, API)
    gcs = view["gcs"]
    gcs_text = (
        f"{_gcs_chip(gcs['reachable'])} <span class=mono>{e(gcs['address'] or '—')}</span>"
        f" <span class=muted>last contact {clock(gcs['lastContactTime'], now)}</span>"
    )
    banners = ""
    if view["hold"]:
        banners += f'<div class="banner"><b>Held:</b> {e(view["hold"])}</div>'
    if not gcs["reachable"] and gcs["lastError"]:
        banners += f'<div class="banner error"><b>The GCS cannot be read:</b> {e(gcs["lastError"])}</div>'
    ray = view["ray"]
    ray_part = (
        _usage(ray)
        + "<h2>Ray nodes <small>(what <code>ray status</code> shows)</small></h2>"
        + _ray_nodes(ray)
        if ray is not None
        else '<p class="muted">Ray\'s GCS could not be read in the latest round.</p>'
    )
    decisions = view["decisions"]
    body = (
        f'<nav><a href="/">All clusters</a> / {e(ns)}</nav><h1>{e(ns)}/{e(name)}</h1>'
        f'<div class="facts"><span>latest round <b>{clock(view["observedAt"], now)}</b> '
        f"({age(since(view['observedAt'], now))} ago)</span><span>GCS {gcs_text}</span>"
        f'<span>JSON: <a href="{e(api_path)}">{e(api_path)}</a></span></div>{banners}'
        f"<h2>Worker groups</h2>{_groups(view, now)}"
        f"<h2>Replicas <small>({len(view['replicas'])})</small></h2>{_replicas(view, now)}"
        f"{_demand(view)}"
        f"<h2>Decisions <small>(newest first, {len(decisions)})</small></h2>"
        + _table(
            ["Time", "Trigger", "What it decided", "Patched", "Input"],
            (_decision(i, d, api_path, now) for i, d in enumerate(decisions)),
            empty="No decision yet.",
        )
        + f"<h2>Resources <small>(Ray's live nodes)</small></h2>{ray_part}"
    )
    return document(f"{ns}/{name}", body, meta=f"as of {clock(rfc3339(now), now)} UTC")


# ---------------------------------------------------------------------------- errors and routes


def error_page(status: int, body: Mapping[str, Any]) -> web.Response:
    message = str(body.get("error") or "error")
    more = ""
    if message == "not the leader":
        leader = body.get("leader")
        more = (
            "<p>This rayscale replica waits for the leader Lease; only the leader autoscales, so only it "
            "knows what the autoscaler sees. "
            + (
                f"The leader is <b class=mono>{e(leader)}</b> (its pod name comes before the “_”); "
                if leader
                else ""
            )
            + "port-forward to that pod instead.</p>"
        )
    elif message == NO_AUTOSCALER:
        more = "<p>Run rayscale with <code>--mode all</code> or <code>--mode autoscaler</code>.</p>"
    text = document(
        str(status),
        f'<nav><a href="/">All clusters</a></nav><h1>{status}</h1>'
        f'<div class="banner error">{e(message)}</div>{more}',
    )
    return html_response(text, status)


async def fleet(request: web.Request) -> web.Response:
    served = request.app[SERVED]
    return html_response(fleet_html(autoscaler_of(served).fleet(), served.wall_clock()))


async def cluster(request: web.Request) -> web.Response:
    view = view_of(request)
    return html_response(cluster_html(view, request.app[SERVED].wall_clock()))


def routes() -> list[web.RouteDef]:
    return [web.get("/", fleet), web.get("/clusters/{namespace}/{name}", cluster)]
