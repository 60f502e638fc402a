"""The status page's parts: its style and script, and how it shows values (times, ages,
resources, chips, tables), every string from the documents through `html.escape`."""

from __future__ import annotations

import base64
import hashlib
import html
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from rayscale.autoscaler.replica_host import in_listing_order
from rayscale.common.timefmt import parse_time

MAX_ROWS = 300  # replicas and Ray nodes listed on the page (all of them are in the JSON API)
UNBOUNDED = 2147483647  # maxReplicas of a group that sets none
BYTES = frozenset({"memory", "object_store_memory"})
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
    chips = [chip(f"{states[s]} {s}", f"s-{s}") for s in in_listing_order(states) if states[s]]
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


def html_table(head: Sequence[str], rows: Iterable[str], *, empty: str = "") -> str:
    body = "".join(rows)
    if not body and empty:
        return f'<p class="muted">{e(empty)}</p>'
    cells = "".join(f'<th class="num">{h[1:]}</th>' if h.startswith("#") else f"<th>{h}</th>" for h in head)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def more_note(shown: int, total: int, what: str) -> str:
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
