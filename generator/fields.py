"""Reading YAML mappings with typed access and located errors.

A Fields wraps one mapping of a description: `get` checks a key's YAML type,
`error` makes a DescriptionError at the key's file and line, and `done`
reports the keys nobody read (unknown keys).
"""

from __future__ import annotations

from generator.schema import MISSING
from generator.source import DescriptionError, YList, YMap


class Fields:
    """Typed access to a YAML mapping; reports unknown keys when done."""

    def __init__(self, value, file: str, path: str, line: int):
        if not isinstance(value, dict):
            raise DescriptionError(file, line, path, f"expected a mapping, found {kind(value)}")
        self.map, self.file, self.path = value, file, path
        self.line = getattr(value, "line", line)
        self.used: set[str] = set()

    def where(self, key: str) -> tuple[str, int, str]:
        line = self.map.line_of(key) if isinstance(self.map, YMap) else self.line
        return self.file, line, f"{self.path}.{key}" if self.path else key

    def error(self, key: str, message: str) -> DescriptionError:
        return DescriptionError(*self.where(key), message)

    def get(self, key: str, kinds, default=MISSING):
        self.used.add(key)
        if key not in self.map:
            if default is MISSING:
                raise DescriptionError(self.file, self.line, self.path, f"'{key}' is required")
            return default
        value = self.map[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
            raise self.error(key, f"expected {_kinds(kinds)}, found {kind(value)}")
        return value

    def items(self, key: str) -> list[tuple[object, str, int]]:
        """The elements of a list field with their paths and lines."""
        values = self.get(key, list, [])
        lines = values.lines if isinstance(values, YList) else []
        path = self.where(key)[2]
        names = getattr(values, "keys", None)  # arguments, written as a mapping
        return [(v, f"{path}.{names[i]}" if names else f"{path}[{i}]",
                 lines[i] if i < len(lines) else self.line)
                for i, v in enumerate(values)]

    def done(self) -> None:
        unknown = [k for k in self.map if k not in self.used]
        if unknown:
            raise self.error(unknown[0], f"unknown key '{unknown[0]}' (known here: "
                             f"{', '.join(sorted(self.used))})")


def _tuple(kinds):
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _kinds(kinds) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
             list: "a list", dict: "a mapping", type(None): "null"}
    return " or ".join(names[k] for k in _tuple(kinds))


def kind(value) -> str:
    if value is None:
        return "null"
    return {bool: "a bool", str: "a string", int: "an integer", float: "a number",
            list: "a list", dict: "a mapping", YList: "a list", YMap: "a mapping"}.get(
        type(value), type(value).__name__)
