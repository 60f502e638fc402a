"""The reference docs name exactly what the code has: the flags of every command, the chart's
values, the annotations and finalizers, the environment variables. Both ways: what the code has
and the docs lack fails, and so does what the docs name and the code does not have."""

from __future__ import annotations

import argparse
from fnmatch import fnmatchcase

import pytest
import yaml
from tests.support import code_reference as code
from tests.support import doc_tables as docs

CONFIGURATION = docs.doc("configuration.md")
STATUS_CLI = docs.doc("status-cli.md")
PARSERS = code.parsers()
#: The tables that document a command's flags: (doc, heading) -> the command ("" is `rayscale`
#: itself); None: a table of commands, each row naming its own (`docs.command_flags`).
FLAG_TABLES: dict[tuple[str, str], str | None] = {
    ("configuration.md", "`rayscale run`"): "run",
    ("configuration.md", "Other commands"): None,
    ("status-cli.md", "Flags"): "status",
    ("status-cli.md", "Replaying a decision: `rayscale simulate --from-cluster`"): "simulate",
}


def documented_flags() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for (name, heading), command in FLAG_TABLES.items():
        text = docs.section(docs.doc(name), heading, subsections=False)
        if command is None:
            for each, flags in docs.command_flags(text).items():
                found.setdefault(each, set()).update(flags)
        else:
            found.setdefault(command, set()).update(docs.table_flags(text))
    return found


def compare(in_code: set[str], documented: set[str], what: str) -> None:
    assert not in_code - documented, f"{what} in the code, not in the docs: {sorted(in_code - documented)}"
    assert not documented - in_code, f"{what} in the docs, not in the code: {sorted(documented - in_code)}"


def test_the_parsers_are_all_found() -> None:
    assert {"", "run", "status", "simulate", "crds", "version", "rayscale.ray.debug"} <= set(PARSERS)
    assert "--leader-elect" in code.options(PARSERS["run"])
    assert "--token-file" in code.options(PARSERS["rayscale.ray.debug"])


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_flag_is_documented_and_exists(command: str) -> None:
    flags = set(code.options(PARSERS[command]))
    documented = documented_flags()
    assert command in documented, f"no doc names the command {command or 'rayscale'!r}"
    globs = {f for f in documented[command] if f.endswith("*")}
    for glob in globs:
        assert any(fnmatchcase(f, glob) for f in flags), f"{glob} matches no flag of {command!r}"
    covered = {f for f in flags if any(fnmatchcase(f, glob) for glob in globs)}
    compare(flags - covered, documented[command] - globs, f"flags of {command or 'rayscale'!r}")


def test_no_doc_names_a_command_that_does_not_exist() -> None:
    assert not set(documented_flags()) - set(PARSERS)


def _defaults(command: str, heading: str, text: str) -> list[str]:
    actions = code.options(PARSERS[command])
    wrong = []
    for flag, row in docs.table_flags(docs.section(text, heading, subsections=False)).items():
        cell, action = row.get("default", ""), actions[flag]
        literal = docs.backticked(cell)[0] if cell.startswith("`") else cell
        if action.default is None or literal.startswith("$") or not (cell.startswith("`") or cell == "off"):
            continue
        if not code.same_default(literal, action.default):
            wrong.append(f"{flag}: the docs say {literal!r}, the code {action.default!r}")
    return wrong


def test_documented_defaults_are_the_parsers_defaults() -> None:
    wrong = _defaults("run", "`rayscale run`", CONFIGURATION) + _defaults("status", "Flags", STATUS_CLI)
    assert not wrong


def test_defaults_in_help_texts_are_the_parsers_defaults() -> None:
    wrong = []
    checked = 0
    for command, parser in PARSERS.items():
        for action in parser._actions:
            literal = code.help_default(action)
            if literal is None or action.default is None or literal.startswith("$"):
                continue
            checked += 1
            if not code.same_default(literal, action.default):
                wrong.append(f"{command} {action.option_strings}: help {literal!r}, code {action.default!r}")
    assert checked > 10
    assert not wrong


def chart_rows() -> dict[str, str]:
    """Documented chart value -> the text of its row."""
    section = docs.section(CONFIGURATION, "Helm chart values")
    return {
        docs.backticked(cells[0])[0]: " ".join(cells)
        for row in docs.rows(section)
        if (cells := list(row.values()))
    }


def test_chart_values_are_documented_and_exist() -> None:
    """Every value values.schema.json allows has a row, or is named in the row of the map or list
    it is in (`featureGates` | ... `[{name, enabled}]`); every row is a value or a map of them."""
    rows = chart_rows()
    tree = dict(code.schema_tree())
    assert [tree[p] for p in ("metrics.serviceMonitor.interval", "shards[].name", "metrics")] == [
        True,
        True,
        False,
    ]

    def named(path: str) -> bool:
        return path in rows or any(
            key in docs.words(rows.get(parent, "")) for parent, key in code.parents(path)
        )

    missing = [path for path, value in tree.items() if value and not named(path)]
    assert not missing, f"chart values in values.schema.json, not in the docs: {missing}"
    unknown = set(rows) - set(tree)
    assert not unknown, f"chart values in the docs, not in values.schema.json: {sorted(unknown)}"


def test_every_value_in_values_yaml_is_documented() -> None:
    documented = set(chart_rows())
    leaves = list(code.value_leaves(yaml.safe_load((code.CHART / "values.yaml").read_text())))
    assert "resources.requests.cpu" in leaves

    def covered(path: str) -> bool:
        parts = path.split(".")
        return any(".".join(parts[:n]) in documented for n in range(1, len(parts) + 1))

    missing = [p for p in leaves if not covered(p)]
    assert not missing, f"values.yaml has values the docs do not name: {missing}"


def test_every_key_constant_has_a_kind() -> None:
    _, problems = code.keys()
    assert not problems


def test_annotations_are_documented_and_exist() -> None:
    by_kind, _ = code.keys()
    assert "rayscale.io/gcs-address" in by_kind["annotation"]
    documented = docs.keys(docs.section(CONFIGURATION, "Annotations", subsections=False))
    compare(by_kind["annotation"], documented, "annotations")


def test_finalizers_are_documented_and_exist() -> None:
    by_kind, _ = code.keys()
    assert "ray.io/gcs-ft-redis-cleanup-finalizer" in by_kind["finalizer"]
    documented = docs.keys(docs.section(CONFIGURATION, "Finalizers"))
    compare(by_kind["finalizer"], documented, "finalizers")
    assert "no finalizer" not in CONFIGURATION


def test_environment_variables_are_documented_and_exist() -> None:
    names, unresolved = code.environment()
    assert not unresolved, "environment reads whose variable the test cannot name"
    assert {"POD_NAMESPACE", "ENABLE_LOGIN_SHELL", "HTTPS_PROXY"} <= names
    documented = docs.env_names(docs.section(CONFIGURATION, "Environment"))
    compare(names, documented, "environment variables")


def test_the_doc_readers_find_what_they_look_for() -> None:
    """The readers themselves: a table row's flags, a command table's commands."""
    text = "| flag | default |\n|---|---|\n| `-o text\\|json`, `--output` | `text` |\n"
    assert docs.table_flags(text).keys() == {"-o", "--output"}
    commands = "| command |\n|---|\n| `rayscale x [--a B]`, `--c`, `rayscale --v` |\n"
    commands += "| `python -m m.n X [--d]` |\n"
    assert docs.command_flags(commands) == {"": {"--v"}, "x": {"--a", "--c"}, "m.n": {"--d"}}
    assert isinstance(code.options(PARSERS[""])["--version"], argparse.Action)
