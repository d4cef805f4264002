"""Read oneDNN's installed C headers (from onednn-devel-cpu-gomp): enum values,
#define'd integers, struct fields and function prototypes, so that the tests can
check what lightnet.archs.dnnl.capi declares against what the library was built from.

A small reader for the shapes those headers use, not a C parser: comments are
dropped, `typedef enum { ... } name;` blocks are evaluated (implicit values count
up from the previous one, aliases take the value they name), integer #defines and
`#define X(idx) ...` are read as text.
"""

from __future__ import annotations

import ast
import importlib.metadata
import operator
import re
from pathlib import Path

HEADERS = ("dnnl_common_types.h", "dnnl_types.h", "dnnl_common.h", "dnnl.h")


def header_dir() -> Path | None:
    """The directory of oneapi/dnnl/*.h in the installed onednn-devel-cpu-gomp, or None."""
    try:
        files = importlib.metadata.distribution("onednn-devel-cpu-gomp").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.as_posix().endswith("oneapi/dnnl/dnnl_types.h"):
            path = Path(f.locate())
            return path.parent if path.exists() else None
    return None


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def read(directory: Path) -> str:
    return "\n".join(_strip_comments((directory / h).read_text()) for h in HEADERS)


_OPS = {ast.BitOr: operator.or_, ast.LShift: operator.lshift, ast.Add: operator.add,
        ast.Mult: operator.mul, ast.Sub: operator.sub}


def _value(expr: str, known: dict[str, int]) -> int:
    """An enumerator's or #define's integer expression: literals (0x1U), names known so
    far, | << + * - and parentheses."""
    expr = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr.strip())

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return known[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(f"cannot evaluate {expr!r}")

    return ev(ast.parse(expr, mode="eval").body)


def enums(text: str) -> dict[str, int]:
    """Every enumerator of every `typedef enum {...} name;`, by name. Lines under
    `#ifdef`/`#if` inside an enum (experimental features) are skipped, as the
    library is built without them."""
    values: dict[str, int] = {}
    for body in re.findall(r"typedef\s+enum\s*\w*\s*\{(.*?)\}\s*\w+\s*;", text, re.S):
        lines, depth = [], 0
        for line in body.splitlines():
            s = line.strip()
            if s.startswith("#if"):
                depth += 1
            elif s.startswith("#endif"):
                depth -= 1
            elif not s.startswith("#") and depth == 0:
                lines.append(line)
        previous = -1
        for item in " ".join(lines).split(","):
            item = item.strip()
            if not item:
                continue
            name, _, expr = item.partition("=")
            name = name.strip()
            previous = _value(expr, values) if expr.strip() else previous + 1
            values[name] = previous
    return values


def defines(text: str) -> dict[str, int]:
    """Integer #defines (chains of names resolved), by name."""
    raw = dict(re.findall(r"#define\s+(DNNL_\w+)[ \t]+([^\n\\]+)", text))
    values: dict[str, int] = {}
    for _ in range(4):  # names defined through other names
        for name, expr in raw.items():
            try:
                values[name] = _value(expr, values)
            except (KeyError, ValueError, SyntaxError):
                pass
    return values


def structs(text: str) -> dict[str, list[tuple[str, str]]]:
    """`typedef struct { type field; ... } name;`: [(C type, field)] by name."""
    result = {}
    for body, name in re.findall(r"typedef\s+struct\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        fields = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if decl:
                m = re.match(r"(.*?)(\w+)$", decl)
                fields.append((m.group(1).replace(" *", "*").strip(), m.group(2)))
        result[name] = fields
    return result


def prototypes(text: str) -> dict[str, tuple[str, list[str]]]:
    """Function declarations `ret DNNL_API name(params);`: (C return type, [C param
    types without names]) by name."""
    result = {}
    text = re.sub(r"^\s*#[^\n]*", "", text, flags=re.M)
    for ret, name, params in re.findall(
            r"([\w\s\*]+?)\s*DNNL_API\s*(\*?\s*dnnl_\w+)\s*\((.*?)\)\s*;", text, re.S):
        star = name.startswith("*")
        name = name.lstrip("* ").strip()
        ret = " ".join(ret.split()).replace(" *", "*") + ("*" if star else "")
        types = []
        params = " ".join(params.split())
        if params not in ("", "void"):
            for p in params.split(","):
                p = p.strip().replace(" *", "*").replace("* ", "*")
                m = re.match(r"(.*?)\s*(\w+)$", p)
                types.append(m.group(1).strip() if m.group(1) else p)
        result[name] = (ret, types)
    return result
