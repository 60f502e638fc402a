"""Regenerates tests/unit/data/cron_vectors.jsonl: robfig/cron v3.0.1's own answers (ParseStandard,
then Next: what KubeRay's RayCronJob controller asks) for schedules, zones and times around
daylight-saving changes, with main.go beside this file. Needs Go and the module in the Go module
cache (it is KubeRay's dependency: tools/kuberay-oracle/build.sh fetches it).

    .venv/bin/python tests/kuberay/cron_vectors/generate.py
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "unit" / "data" / "cron_vectors.jsonl"

VALID = [
    "* * * * *",
    "*/5 * * * *",
    "0/15 * * * *",
    "5/15 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 2 * * *",
    "0 1 * * *",
    "0 3 * * *",
    "30 1 * * *",
    "0 0 * * *",
    "0 0 1 * *",
    "0 0 29 2 *",
    "0 0 * * 0",
    "0 9 * * mon-fri",
    "0 9 * * MON-FRI",
    "15 10 * jan,jul *",
    "0 0 1,15 * sun",
    "0 0 */10 * sun",
    "0 0 * * Mon/2",
    "0 0 */5 apr,aug,oct mon",
    "20-35/15 * * * *",
    "* * 1,15 * *",
    "? ? ? ? ?",
    "*/1 * * * *",
    "0 */2 * * *",
    "1,,2 * * * *",
    "*-5 * * * *",
    "0 0 31 * *",
    "0 12 * feb *",
    "59 23 31 dec *",
    "0 0 1 1 *",
    "0-59/7 * * * *",
    "45 23 * * 6",
    "0 0 30 * *",
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "@every 5s",
    "@every 1h30m",
    "@every 90s",
    "@every 500ms",
    "@every 1.5s",
    "@every -5s",
    "@every 1m0.9s",
    "@every 2h45m10s",
    "@every 0",
    "TZ=America/New_York 0 * * * *",
    "CRON_TZ=America/New_York 30 2 * * *",
    "TZ=Europe/Berlin 30 2 * * *",
    "CRON_TZ=Asia/Kolkata 0 9 * * *",
    "TZ=UTC 0 0 * * *",
    "CRON_TZ=Australia/Lord_Howe 0 2 * * *",
    "TZ=America/Sao_Paulo 0 0 * * *",
    "TZ=America/New_York @daily",
]
UNSATISFIABLE = ["0 0 30 2 *", "0 0 31 4 *", "1,, * * * *"]
INVALID = [
    "",
    "invalid cron string",
    "* * * *",
    "* * * * * *",
    "60 * * * *",
    "* 24 * * *",
    "* * 0 * *",
    "* * 32 * *",
    "* * * 13 *",
    "* * * 0 *",
    "* * * * 7",
    "5-1 * * * *",
    "*/0 * * * *",
    "1-2-3 * * * *",
    "1/2/3 * * * *",
    "a * * * *",
    "-1 * * * *",
    "+5 * * * *",
    "* * * foo *",
    "@every",
    "@every x",
    "@every 5",
    "@every 5y",
    "@reboot",
    "@daily ",
    "TZ=Nowhere/Land * * * * *",
    "TZ=America/New_York",
    "CRON_TZ= * * * * *",
    "@every  5s",
    "*/-1 * * * *",
    "1.5 * * * *",
]
ZONES = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "America/Sao_Paulo",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
]
# around daylight-saving changes (both hemispheres), a leap day, year ends
MOMENTS = [
    "2012-03-11T04:30:00Z",
    "2012-03-11T06:00:00Z",
    "2012-03-11T07:30:00Z",
    "2012-11-04T04:00:00Z",
    "2012-11-04T05:45:00Z",
    "2012-11-04T06:00:00Z",
    "2024-03-31T00:30:00Z",
    "2024-10-27T00:30:00Z",
    "2018-11-03T02:00:00Z",
    "2018-02-17T01:00:00Z",
    "2024-04-06T14:00:00Z",
    "2024-10-05T14:30:00Z",
    "2024-02-28T23:59:59Z",
    "2023-12-31T23:59:30Z",
    "2024-07-09T23:35:51Z",
    "2026-01-15T12:00:00Z",
]


def cases() -> list[dict[str, str]]:
    rng = random.Random(7)
    out = []
    for spec in VALID + UNSATISFIABLE:
        for zone in ZONES:
            moments = [*rng.sample(MOMENTS, 4)]
            for _ in range(2):
                base = datetime(2010, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(20 * 365 * 86400))
                moments.append(base.strftime("%Y-%m-%dT%H:%M:%SZ"))
            out += [{"spec": spec, "zone": zone, "after": m} for m in moments]
    out += [{"spec": spec, "zone": "UTC", "after": MOMENTS[0]} for spec in INVALID]
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "gen"
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off"}
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=HERE, env=env, check=True)
        lines = "".join(json.dumps(c) + "\n" for c in cases())
        answers = subprocess.run([str(binary)], input=lines, capture_output=True, text=True, check=True)
    OUT.write_text(answers.stdout)
    print(f"{len(answers.stdout.splitlines())} vectors -> {OUT}")


if __name__ == "__main__":
    main()
