"""Reading YAML while remembering where every value came from.

Mappings load as YMap and sequences as YList: ordinary dict and list, plus
the line of the node and of each key or item, so that every validation error
can point at `file:line`.
"""

from __future__ import annotations

from pathlib import Path

import yaml


class DescriptionError(Exception):
    """An invalid description: `file:line: path: message`."""

    def __init__(self, file, line, path: str, message: str):
        self.file, self.line, self.path = file, line, path
        where = f"{file}:{line}" if line else str(file)
        super().__init__(_one_line(f"{where}: {path}: {message}" if path
                                   else f"{where}: {message}"))


def _one_line(text: str) -> str:
    """Unprintable characters (a newline in a key, say) escaped: an error is one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape",
                                                      "backslashreplace").decode("ascii")
                   for c in text)


class YMap(dict):
    line: int = 0

    def __init__(self, *args):
        super().__init__(*args)
        self.lines: dict = {}
        self.text_lines: dict = {}  # key -> first line of a `|` block value

    def line_of(self, key) -> int:
        return self.lines.get(key, self.line)

    def text_line(self, key) -> int:
        """The line the value of `key` starts on: the line after the key for a
        `|` block (code), else the key's own line."""
        return self.text_lines.get(key, self.line_of(key))


class YList(list):
    line: int = 0

    def __init__(self, *args):
        super().__init__(*args)
        self.lines: list = []

    def line_of(self, index: int) -> int:
        return self.lines[index] if index < len(self.lines) else self.line


class _Loader(yaml.SafeLoader):
    pass


def _construct_map(loader, node):
    loader.flatten_mapping(node)
    result = YMap()
    result.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise DescriptionError(loader.name, line, "", f"keys must be strings, found {key!r}")
        if key in result:
            raise DescriptionError(loader.name, line, key, "key given twice")
        result[key] = loader.construct_object(value_node, deep=True)
        result.lines[key] = line
        if isinstance(value_node, yaml.ScalarNode) and value_node.style == "|":
            result.text_lines[key] = value_node.start_mark.line + 2
    return result


def _construct_seq(loader, node):
    result = YList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.lines = [child.start_mark.line + 1 for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_seq)


# The most values a description may hold once its aliases are expanded: far
# beyond any real description, far below what an alias bomb (`&a [1, 1, ...]`,
# `&b [*a, *a, ...]`, ...) asks for.
MAX_VALUES = 100_000


def _check_expansion(root, label: str) -> None:
    """Refuse aliases that expand to more than MAX_VALUES values, or that
    contain themselves: every later walk of the data would never end."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise DescriptionError(label, node.start_mark.line + 1, "",
                                   "a recursive alias: a value contains itself")
        if isinstance(node, yaml.ScalarNode):
            return 1
        active.add(key)
        children = (node.value if isinstance(node, yaml.SequenceNode)
                    else [n for pair in node.value for n in pair])
        total = 1 + sum(size(child) for child in children)
        active.discard(key)
        if total > MAX_VALUES:
            raise DescriptionError(label, node.start_mark.line + 1, "",
                                   f"the aliases here expand to more than {MAX_VALUES} values")
        sizes[key] = total
        return total

    size(root)


def load_yaml(path: Path, label: str):
    """The document in `path`; DescriptionError on a syntax error."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DescriptionError(label, data.count(b"\n", 0, e.start) + 1, "",
                               "the file is not UTF-8 text") from None
    loader = None
    try:
        loader = _Loader(text)  # the reader checks every character here
        loader.name = label
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, label)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 0
        raise DescriptionError(label, line, "", f"invalid YAML: {e.problem or e.context}") from None
    except yaml.reader.ReaderError as e:  # a character YAML does not allow
        line = text.count("\n", 0, e.position) + 1
        raise DescriptionError(label, line, "", f"invalid YAML: character "
                               f"U+{e.character:04X} is not allowed") from None
    except yaml.YAMLError as e:
        raise DescriptionError(label, 0, "", f"invalid YAML: {e}") from None
    finally:
        if loader is not None:
            loader.dispose()
