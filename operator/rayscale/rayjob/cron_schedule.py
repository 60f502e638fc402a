"""A RayCronJob's schedule: the cron expressions KubeRay accepts and their next tick. Pure.

KubeRay parses ``spec.schedule`` with robfig/cron v3's ``ParseStandard`` and asks the schedule for
``Next(t)``; this is a port of both, quirks included, so that a schedule means here what it means
to KubeRay:

- five fields (minute, hour, day of month, month, day of week), each a comma list of ``*`` or
  ``?``, ``N``, ``N-M``, each with an optional ``/step`` (``N/step`` is ``N-max/step``); month and
  day names (``jan``, ``mon``, any case); day of week 0-6 (Sunday is 0; 7 is refused);
- when both day fields are restricted (neither starts with ``*`` or ``?``), a day matching
  either runs; otherwise a day must match both;
- ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``, ``@hourly``,
  and ``@every <duration>`` (Go's duration syntax: ``90s``, ``1h30m``; under a second counts as a
  second, fractions of a second are dropped; ticks ``duration`` after the time it is asked from);
- a ``CRON_TZ=<zone>`` or ``TZ=<zone>`` prefix: the zone the fields are read in;
- ``Next`` walks months, days, hours, minutes and seconds in the zone as Go's time package does
  around daylight-saving changes (a skipped hour does not run; a repeated hour runs once), and
  finds nothing (None) when no time matches within five years (``0 0 31 2 *``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import UTC, date, datetime
from fractions import Fraction
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["CronError", "Every", "Schedule", "Spec", "load_zone", "next_tick", "parse_standard"]

_STAR = 1 << 63  # robfig's starBit: the field was * or ? (with a step of 1)
_EPOCH = date(1970, 1, 1).toordinal()


class CronError(ValueError):
    """A schedule robfig/cron refuses; the message is robfig's."""


@dataclasses.dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: tuple[tuple[str, int], ...] = ()


_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_SECONDS = _Bounds(0, 59)
_MINUTES = _Bounds(0, 59)
_HOURS = _Bounds(0, 23)
_DOM = _Bounds(1, 31)
_MONTHS = _Bounds(1, 12, tuple((n, i + 1) for i, n in enumerate(_MONTH_NAMES)))
_DOW = _Bounds(0, 6, tuple((n, i) for i, n in enumerate(_DAY_NAMES)))


@dataclasses.dataclass(frozen=True)
class Spec:
    """robfig's SpecSchedule: a bit set per field; `zone` from a CRON_TZ=/TZ= prefix (None: the
    zone the caller reads the schedule in)."""

    second: int
    minute: int
    hour: int
    dom: int
    month: int
    dow: int
    zone: str | None = None


@dataclasses.dataclass(frozen=True)
class Every:
    """robfig's ConstantDelaySchedule (``@every``): whole seconds, at least one."""

    seconds: int
    zone: str | None = None


Schedule = Spec | Every


def load_zone(name: str) -> ZoneInfo:
    """An IANA zone; CronError as Go's LoadLocation fails ("unknown time zone X")."""
    if name in ("", "UTC"):
        return ZoneInfo("UTC")
    if name == "Local" or name.startswith("/") or ".." in name:
        raise CronError(f"unknown time zone {name}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"unknown time zone {name}") from None


def parse_standard(spec: str) -> Schedule:
    """robfig/cron v3 ParseStandard: five fields or a descriptor, after an optional zone prefix."""
    if not spec:
        raise CronError("empty spec string")
    zone: str | None = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space < 0:  # robfig slices out of range here (a panic); refused instead
            raise CronError(f"provided bad location {spec}: no schedule after the time zone")
        name = spec[spec.index("=") + 1 : space]
        try:
            if name != "Local":  # Go's Local: here the zone the caller reads the schedule in
                load_zone(name)
        except CronError as exc:
            raise CronError(f"provided bad location {name}: {exc}") from None
        zone, spec = (None if name == "Local" else name), spec[space:].strip()
    if spec.startswith("@"):
        return _descriptor(spec, zone)
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    return Spec(
        second=1 << 0,
        minute=_field(fields[0], _MINUTES),
        hour=_field(fields[1], _HOURS),
        dom=_field(fields[2], _DOM),
        month=_field(fields[3], _MONTHS),
        dow=_field(fields[4], _DOW),
        zone=zone,
    )


def _field(field: str, bounds: _Bounds) -> int:
    bits = 0
    for expr in (part for part in field.split(",") if part):
        bits |= _range(expr, bounds)
    return bits


def _range(expr: str, bounds: _Bounds) -> int:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = bounds.low, bounds.high, _STAR
    else:
        start = _int_or_name(low_and_high[0], bounds)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _int(range_and_step[1])
        if single:
            end = bounds.high
        if step > 1:
            extra = 0
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    bits = 0
    for i in range(start, end + 1, step):
        bits |= 1 << i
    return bits | extra


def _int_or_name(expr: str, bounds: _Bounds) -> int:
    for name, value in bounds.names:
        if name == expr.lower():
            return value
    return _int(expr)


_ATOI = re.compile(r"[+-]?[0-9]+")


def _int(expr: str) -> int:
    """Go's strconv.Atoi, and robfig's refusal of negative numbers."""
    if not _ATOI.fullmatch(expr):
        raise CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    num = int(expr)
    if not -(2**63) <= num < 2**63:
        raise CronError(
            f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": value out of range'
        )
    if num < 0:
        raise CronError(f"negative number ({num}) not allowed: {expr}")
    return num


def _all(bounds: _Bounds) -> int:
    return _range("*", bounds)


def _descriptor(descriptor: str, zone: str | None) -> Schedule:
    first = {
        "second": 1 << _SECONDS.low,
        "minute": 1 << _MINUTES.low,
        "hour": 1 << _HOURS.low,
        "dom": 1 << _DOM.low,
        "month": 1 << _MONTHS.low,
        "dow": 1 << _DOW.low,
    }
    every = {"hour": _all(_HOURS), "dom": _all(_DOM), "month": _all(_MONTHS), "dow": _all(_DOW)}
    keep: tuple[str, ...] | None = {
        "@yearly": ("dow",),
        "@annually": ("dow",),
        "@monthly": ("month", "dow"),
        "@weekly": ("dom", "month"),
        "@daily": ("dom", "month", "dow"),
        "@midnight": ("dom", "month", "dow"),
        "@hourly": ("hour", "dom", "month", "dow"),
    }.get(descriptor)
    if keep is not None:
        return Spec(**{**first, **{k: every[k] for k in keep}}, zone=zone)
    if descriptor.startswith("@every "):
        try:
            nanos = parse_go_duration(descriptor[len("@every ") :])
        except CronError as exc:
            raise CronError(f"failed to parse duration {descriptor}: {exc}") from None
        return Every(max(nanos, 10**9) // 10**9, zone=zone)
    raise CronError(f"unrecognized descriptor: {descriptor}")


_UNITS = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,  # U+00B5
    "μs": 10**3,  # U+03BC
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_go_duration(text: str) -> int:
    """Go's time.ParseDuration, in nanoseconds (its messages)."""
    quoted = f'"{text}"'
    rest, sign = text, 1
    if rest[:1] in ("-", "+"):
        sign, rest = (-1 if rest[0] == "-" else 1), rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise CronError(f"time: invalid duration {quoted}")
    total = Fraction(0)
    while rest:
        match = _PART.match(rest)
        assert match is not None  # every part of the pattern may be empty
        whole, frac, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not frac:
            raise CronError(f"time: invalid duration {quoted}")
        if not unit:
            raise CronError(f"time: missing unit in duration {quoted}")
        if unit not in _UNITS:
            raise CronError(f'time: unknown unit "{unit}" in duration {quoted}')
        value = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
        total += value * _UNITS[unit]
        rest = rest[match.start(3) + len(unit) :]
    nanos = int(total)
    if nanos >= 2**63:
        raise CronError(f"time: invalid duration {quoted}")
    return sign * nanos


# ---- Next, with Go's time arithmetic: an instant is whole Unix seconds, fields are read in `zone`


def _offset(instant: int, zone: ZoneInfo) -> int:
    delta = datetime.fromtimestamp(instant, zone).utcoffset()
    return int(delta.total_seconds()) if delta is not None else 0


def _go_date(year: int, month: int, day: int, hour: int, minute: int, second: int, zone: ZoneInfo) -> int:
    """Go's time.Date: fields normalised, then the zone's offset as Go picks it (in a skipped hour,
    the offset at the wall time read as UTC, corrected once)."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    days = date(year, month, 1).toordinal() - _EPOCH + day - 1
    wall = days * 86400 + hour * 3600 + minute * 60 + second
    return wall - _offset(wall - _offset(wall, zone), zone)


def next_tick(schedule: Schedule, after: datetime, zone: ZoneInfo) -> datetime | None:
    """robfig's Schedule.Next: the first tick strictly after `after` (a whole second, UTC), read in
    the schedule's prefix zone or else `zone`; None when there is none within five years."""
    if schedule.zone is not None:
        zone = load_zone(schedule.zone)
    floor = math.floor(after.timestamp())
    if isinstance(schedule, Every):
        return datetime.fromtimestamp(floor + schedule.seconds, UTC)
    found = _next_spec(schedule, floor + 1, zone)
    return None if found is None else datetime.fromtimestamp(found, UTC)


def _next_spec(s: Spec, t: int, zone: ZoneInfo) -> int | None:
    def wall(instant: int) -> datetime:
        return datetime.fromtimestamp(instant, zone)

    def day_matches(w: datetime) -> bool:
        dom_match = bool(1 << w.day & s.dom)
        dow_match = bool(1 << ((w.weekday() + 1) % 7) & s.dow)
        if s.dom & _STAR or s.dow & _STAR:
            return dom_match and dow_match
        return dom_match or dow_match

    added = False
    year_limit = wall(t).year + 5
    while True:  # robfig's WRAP label
        w = wall(t)
        if w.year > year_limit:
            return None
        wrapped = False
        while not 1 << w.month & s.month:
            if not added:
                added = True
                t = _go_date(w.year, w.month, 1, 0, 0, 0, zone)
                w = wall(t)
            t = _go_date(w.year, w.month + 1, w.day, w.hour, w.minute, w.second, zone)
            w = wall(t)
            if w.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not day_matches(w):
            if not added:
                added = True
                t = _go_date(w.year, w.month, w.day, 0, 0, 0, zone)
                w = wall(t)
            t = _go_date(w.year, w.month, w.day + 1, w.hour, w.minute, w.second, zone)
            w = wall(t)
            if w.hour != 0:  # a day that does not start at midnight (daylight saving)
                t += (24 - w.hour) * 3600 if w.hour > 12 else -w.hour * 3600
                w = wall(t)
            if w.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not 1 << w.hour & s.hour:
            if not added:
                added = True
                t = _go_date(w.year, w.month, w.day, w.hour, 0, 0, zone)
            t += 3600
            w = wall(t)
            if w.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        for unit, bits, part in ((60, s.minute, "minute"), (1, s.second, "second")):
            while not 1 << getattr(w, part) & bits:
                if not added:
                    added = True
                    t -= t % unit
                t += unit
                w = wall(t)
                if getattr(w, part) == 0:
                    wrapped = True
                    break
            if wrapped:
                break
        if wrapped:
            continue
        return t
