"""The status page: the fleet (``/``) and one cluster (``/clusters/{namespace}/{name}``) as plain
server-rendered HTML, from the same documents as the JSON API (rayscale.autoscaler.view).

Every string that comes from the documents (names, resources, messages) goes through
`html.escape`; the page has a little inline CSS and one short script that fetches the page again
every 2 seconds and swaps in its ``<main>`` (the Content-Security-Policy allows that script by
its hash and nothing else). Long lists are cut for the page (the JSON API has them whole).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from aiohttp import web

from rayscale.autoscaler.replica_host import listing_rank
from rayscale.common.timefmt import rfc3339
from rayscale.web.api import API, NO_AUTOSCALER, SERVED, autoscaler_of, view_of
from rayscale.web.parts import (
    CSP,
    MAX_ROWS,
    NONE,
    TICKS,
    UNBOUNDED,
    age,
    amount,
    chip,
    clock,
    cluster_path,
    document,
    e,
    html_table,
    more_note,
    resources,
    shape,
    since,
    state_chips,
)

__all__ = ["MAX_ROWS", "cluster_html", "error_page", "fleet_html", "routes"]


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
    table = html_table(
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
        if g.get("refused"):  # a ResourceQuota refuses its pods or a scaleGate holds it
            backoff += '<span class="chip bad">held back: quota or scaleGate</span>'
        rows.append(
            f'<tr data-group="{e(g["name"])}"><td><b>{e(g["name"])}</b> {backoff}</td>'
            f'<td class="num">{e(g["minReplicas"])}</td><td class="num">{top}</td>'
            f'<td class="num">{e(g["numOfHosts"])}</td>'
            f'<td class="num"><b>{e(g["desired"])}</b></td><td class="num">{e(g["current"])}</td>'
            f"<td>{state_chips(g['states'])}</td><td>{resources(g['hostResources'])}</td></tr>"
        )
    return html_table(
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
    table = html_table(
        ["Node", "Pod", "Group", "State", "Used / total", "#Idle for"], rows, empty="Ray has no node."
    )
    return table + more_note(len(rows), len(nodes), "Ray nodes")


def _ray_state(state: str) -> str:
    return {"RUNNING": "s-ready", "IDLE": "s-idle", "DRAINING": "s-draining", "DEAD": "s-failed"}.get(
        state, ""
    )


def _window(ages: Iterable[float]) -> int:
    oldest = max(ages, default=0.0)
    return next((t for t in TICKS if oldest <= t), TICKS[-1])


def _replicas(view: Mapping[str, Any], now: datetime) -> str:
    """Each replica a row: its state since when, as a bar on a shared time axis ending now."""
    replicas = sorted(
        view["replicas"], key=lambda r: (r["gone"], r["group"], listing_rank(r["state"]), r["since"])
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
    table = html_table(
        ["Group", "Replica", "State", "Since", "#For", f"In its state since {axis}"],
        rows,
        empty="No worker replica.",
    )
    return table + more_note(len(rows), len(replicas), "replicas")


def _demand(view: Mapping[str, Any]) -> str:
    demand = view["demand"]
    unmet = [
        f'<tr><td>{shape(u)}</td><td class="num">{e(u["count"])}</td>'
        f"<td>{chip(u['reason'], 'bad')}</td><td>{e(u['why'])}</td></tr>"
        for u in demand["unmet"]
    ]
    pending = [f'<tr><td>{shape(p)}</td><td class="num">{e(p["count"])}</td></tr>' for p in demand["pending"]]
    out = "<h2>Unmet demand</h2>" + html_table(
        ["What", "#Count", "Reason", "Why"], unmet, empty="None: every pending demand fits."
    )
    out += "<h2>Pending demand</h2>" + html_table(
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
        + html_table(
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
