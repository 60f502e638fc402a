"""batch_allowlist.yaml: deliberate differences that only a batch scheduler's runs show, each
for the schedulers it names (``schedulers``, KubeRay's names); otherwise an allowlist.yaml entry
(entries.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.kuberay import entries
from tests.kuberay.entries import Entry

PATH = Path(__file__).resolve().parent / "batch_allowlist.yaml"


def load(path: Path = PATH) -> dict[str, list[Entry]]:
    """The entries for each scheduler named in the file."""
    out: dict[str, list[Entry]] = {}
    seen: set[str] = set()
    for item in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
        item = dict(item)
        schedulers = item.pop("schedulers", None)
        if not isinstance(schedulers, list) or not schedulers:
            raise ValueError(f"{path}: entry {item.get('id')!r} names no schedulers")
        entry = entries.entry_from(item, path)
        if entry.id in seen:
            raise ValueError(f"{path}: repeated id {entry.id}")
        seen.add(entry.id)
        for name in schedulers:
            out.setdefault(str(name), []).append(entry)
    return out
