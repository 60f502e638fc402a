"""The Helm chart ships exactly the generated CRDs (Helm installs charts/rayscale/crds/ as is)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_chart_crds_are_the_generated_crds() -> None:
    top = {p.name: p.read_text() for p in (ROOT / "crds").glob("*.yaml")}
    chart = {p.name: p.read_text() for p in (ROOT / "charts/rayscale/crds").glob("*.yaml")}
    assert top, "crds/ is empty"
    assert chart.keys() == top.keys(), "charts/rayscale/crds/ lists other files than crds/: run `make crds`"
    for name, text in top.items():
        assert chart[name] == text, f"charts/rayscale/crds/{name} differs from crds/{name}: run `make crds`"
