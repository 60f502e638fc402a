"""Reading the reference tables of the docs: a section by its heading, its table rows by column
name, and the flags, keys and names written in backticks in a cell. Pure text, no rayscale."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_HEADING = re.compile(r"^(#+)\s+(.*?)\s*$")
_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_BACKTICKED = re.compile(r"`([^`]+)`")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*\*?)")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def doc(name: str) -> str:
    return (DOCS / name).read_text()


def section(text: str, heading: str, *, subsections: bool = True) -> str:
    """The lines under the heading whose title is `heading` (without the #s), up to the next
    heading of the same or a higher level (without `subsections`: up to the next heading).
    KeyError when there is no such heading."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        match = _HEADING.match(line)
        if match and match.group(2) == heading:
            level = len(match.group(1))
            end = next(
                (
                    i
                    for i in range(start + 1, len(lines))
                    if (m := _HEADING.match(lines[i])) and (len(m.group(1)) <= level or not subsections)
                ),
                len(lines),
            )
            return "\n".join(lines[start + 1 : end])
    raise KeyError(f"no heading {heading!r}")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in _CELL_SPLIT.split(line.strip().strip("|"))]


def rows(text: str) -> list[dict[str, str]]:
    """Every row of every table in `text`, keyed by its table's header cells."""
    lines = text.splitlines()
    found: list[dict[str, str]] = []
    header: list[str] | None = None
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            header = None
        elif i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
            header = _cells(line)
        elif header is not None and not _SEPARATOR.match(line):
            found.append(dict(zip(header, _cells(line), strict=False)))
    return found


def backticked(cell: str) -> list[str]:
    """What is written `like this` in a cell, with markdown's escaped pipes unescaped."""
    return [code.replace("\\|", "|") for code in _BACKTICKED.findall(cell)]


def words(text: str) -> set[str]:
    """The names written in backticks in `text`: `[{name, enabled}]` names name and enabled."""
    return {word for code in backticked(text) for word in re.findall(r"[A-Za-z_]\w*", code)}


def first_column(text: str) -> list[str]:
    """The backticked names in the first cell of every table row of `text`."""
    return [code for row in rows(text) for code in backticked(next(iter(row.values()), ""))]


def env_names(text: str) -> set[str]:
    """The environment variables named in the first column of the tables of `text`."""
    return {code for code in first_column(text) if _ENV_NAME.match(code)}


def keys(text: str) -> set[str]:
    """The keys in the first column of the tables of `text`, without an example value
    (`rayscale.io/gcs-address: "host:port"` is `rayscale.io/gcs-address`)."""
    return {code.split(":")[0].strip() for code in first_column(text)}


def leading_flag(code: str) -> str | None:
    """`--mode all|controller` -> `--mode`; None when the code does not start with a flag."""
    match = _FLAG.match(code)
    return match.group(1) if match else None


def table_flags(text: str) -> dict[str, dict[str, str]]:
    """flag -> its table row, for the rows of `text` whose first cell names flags."""
    flags: dict[str, dict[str, str]] = {}
    for row in rows(text):
        for code in backticked(next(iter(row.values()), "")):
            flag = leading_flag(code)
            if flag is not None:
                flags[flag] = row
    return flags


def command_flags(text: str) -> dict[str, set[str]]:
    """The commands a table of commands names, and their flags: `rayscale crds [--output-dir DIR]`
    is crds's `--output-dir`; `rayscale --version` is the top-level parser's (command ""), `python
    -m rayscale.ray.debug ...` the module's; a bare `--indent N` belongs to its row's command."""
    commands: dict[str, set[str]] = {}
    for row in rows(text):
        row_command: str | None = None
        for code in backticked(next(iter(row.values()), "")):
            if code.startswith("python -m "):
                module, *words = code.removeprefix("python -m ").split()
                command, flags = module, _FLAG.findall(" ".join(words))
            elif code.split()[0] == "rayscale":
                words = code.split()[1:]
                sub = next((w for w in words if not w.startswith(("-", "["))), None)
                before = words[: words.index(sub)] if sub is not None else words
                commands.setdefault("", set()).update(_FLAG.findall(" ".join(before)))
                command = sub or ""
                flags = _FLAG.findall(" ".join(words[len(before) + 1 :])) if sub else []
            elif (flag := leading_flag(code)) is not None and row_command is not None:
                command, flags = row_command, [flag]
            else:
                continue
            row_command = row_command if row_command is not None else command
            commands.setdefault(command, set()).update(flags)
    return commands
