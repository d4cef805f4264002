"""The concise intermediate language (IL) front-end: IL text -> LightNet's JSON IR.

A model is a list of statements, one op each::

    create(| dst=t1 | dtype="TL_FLOAT", dims=[2, 4], ran=[-1, 1]);
    slice(src=t1 | dst=t2 | axis=1, start=1, len=3);
    print(src=t2 | | msg="tensor2:");

The text first goes through a C preprocessor (`#define` with parameters, `##`,
`#include`, `#if`...): the pure-Python `pcpp` (the `il` extra) or else the
system `cpp`. Errors name the original file, line and column, read back from
the line markers the preprocessor writes. The language is specified in
docs/il.md.

    doc = to_ir(Path("model.net"), defines=["N=4"])     # -> {"ops": [...]}
    text = format_ir(doc)

`il2json` (main below) is the command.
"""

from __future__ import annotations

import argparse
import bisect
import difflib
import io
import json
import math
import os
import re
import shutil
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lightnet.command import report_errors
from lightnet.errors import LightNetError
from lightnet.frontends import il_eval, il_limits

PREPROCESSORS = ("auto", "pcpp", "cpp", "none")
MAX_INCLUDE_DEPTH = 100
_PCPP_HINT = "pip install 'lightnet[il]'"


class ILError(LightNetError):
    """An error in IL source text, at `file:line[:col]` of the original source."""

    def __init__(self, msg: str, file: str | None = None, line: int | None = None,
                 col: int | None = None):
        self.msg = msg
        self.file = file
        self.line = line
        self.col = col
        where = ":".join(str(x) for x in (file, line, col) if x is not None)
        super().__init__(f"{where}: {msg}" if where else msg)


class ILWarning(UserWarning):
    """A `#warning` directive of the IL source."""


# ---------------------------------------------------------------------------
# The API


def to_ir(source, *, filename: str | None = None, defines=(), include_dirs=(),
          preprocessor: str = "auto", on_warning=None) -> dict:
    """The JSON IR document (a dict) of an IL model.

    `source` is a path (any os.PathLike, e.g. pathlib.Path: the file is read)
    or a str holding the IL text itself. `filename` names the source in
    messages; `#include "..."` searches its directory first (default: the
    current directory for text). `defines` are `NAME`, `NAME=VALUE` or `F(x)=VALUE` strings,
    or a mapping name -> value; `include_dirs` are searched by `#include`
    after the including file's directory. `preprocessor` is `pcpp`, `cpp`
    (the system C preprocessor), `none` (no macros, no directives) or `auto`
    (pcpp if installed, else cpp). `on_warning(message)` receives `#warning`s
    (default: Python's warnings module). Raises LightNetError (ILError for a
    problem in the text, naming its original file, line and column).
    """
    if isinstance(source, os.PathLike):
        label = filename or os.fspath(source)
        text = _read_file(os.fspath(source), label)
    elif isinstance(source, str):
        label = filename or "<string>"
        text = source
    else:
        raise TypeError(f"source must be a str (IL text) or a path, not {type(source).__name__}")
    if on_warning is None:
        def on_warning(message):
            warnings.warn(message, ILWarning, stacklevel=3)
    pre = _preprocess(text, label, _defines(defines), [os.fspath(d) for d in include_dirs],
                      preprocessor, on_warning)
    return {"ops": _Parser(pre).parse()}


def format_ir(doc: dict) -> str:
    """The IR document as deterministic, indented JSON text (examples/ style)."""
    def item(value):
        return json.dumps(value, ensure_ascii=True, allow_nan=False)

    def items(values, indent):
        if len(values) <= 1:
            return "[" + "".join(item(v) for v in values) + "]"
        inner = ",\n".join(" " * (indent + 4) + item(v) for v in values)
        return "[\n" + inner + "\n" + " " * indent + "]"

    ops = []
    for op in doc["ops"]:
        fields = [f'"name": {item(op["name"])}', f'"optype": {item(op["optype"])}']
        for key in ("tensors_in", "tensors_out", "params"):
            fields.append(f"{item(key)}: {items(op[key], 12)}")
        ops.append("        {\n" + ",\n".join(" " * 12 + f for f in fields) + "\n        }")
    if not ops:
        return '{\n    "ops": []\n}\n'
    return '{\n    "ops": [\n' + ",\n".join(ops) + "\n    ]\n}\n"


def _read_file(path: str, label: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise LightNetError(f"{label}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise LightNetError(f"{label}: the file is not UTF-8 text") from None


_MACRO_NAME = re.compile(r"[A-Za-z_]\w*(\([\w\s,.]*\))?\Z")


def _defines(defines) -> list[tuple[str, str]]:
    """`-D` arguments as (name, value) pairs; a bare NAME is defined as 1."""
    if isinstance(defines, Mapping):
        pairs = [(str(k), "1" if v is None else str(v)) for k, v in defines.items()]
    else:
        pairs = []
        for d in defines:
            name, eq, value = str(d).partition("=")
            pairs.append((name, value if eq else "1"))
    for name, _ in pairs:
        if not _MACRO_NAME.match(name):
            raise LightNetError(f"bad macro name '{name}' to define "
                                "(expected NAME, NAME=VALUE or F(x)=VALUE)")
    return pairs


# ---------------------------------------------------------------------------
# Preprocessing: text -> (preprocessed lines, where each came from)


@dataclass
class _Preprocessed:
    """Preprocessed text and, for each of its lines, the original file and line."""

    text: str
    origins: list  # per line of text: (file key, line number in that file)
    label: str  # the top-level source's name in messages
    top_key: str  # the top-level source's file key in origins
    top_text: str  # the top-level source text, comments blanked (for columns)
    directives: bool = True  # whether a preprocessor ran

    def display(self, key: str) -> str:
        if key == self.top_key:
            return self.label
        return _display_path(key)

    def original_line(self, key: str, line: int) -> str | None:
        """Line `line` of a source file, comments blanked."""
        if key == self.top_key:
            text = self.top_text
        else:
            try:
                text = _blank_comments(Path(key).read_text(encoding="utf-8"), key, False)
            except (OSError, UnicodeDecodeError, ILError):
                return None
        lines = text.splitlines()
        return lines[line - 1] if 0 < line <= len(lines) else None


def _display_path(path: str) -> str:
    """An included file's name in messages: relative to the current directory
    when it is below it, else as it is."""
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(os.pardir):
            return rel
    return os.path.normpath(path)


_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)


def _blank_comments(text: str, label: str, escape_trigraphs: bool = True) -> str:
    """`text` with its comments replaced by spaces, keeping every other
    character at its line and column.

    The preprocessors would replace a comment by one space, shifting columns,
    and pcpp gives what follows a comment of several lines the line where the
    comment began. In a directive line (#define ... /* ... */ ...) the
    newlines of a comment become line splices, so the directive goes on.
    Strings are kept (with ? escaped where a trigraph could form).
    """
    def blank(m):
        s = m.group()
        if s.startswith('"'):
            # pcpp would read ??= ??/ ... in a string as trigraphs: write \? instead.
            return s.replace("?", "\\?") if escape_trigraphs and "??" in s else s
        if s.startswith("/*") and (len(s) < 4 or not s.endswith("*/")):
            line = text.count("\n", 0, m.start()) + 1
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            raise ILError("unterminated comment", label, line, col)
        if "\n" not in s:
            return " " * len(s)
        newline = "\\\n" if _in_directive(text, m.start()) else "\n"
        return newline.join(" " * len(part) for part in s.split("\n"))

    return _COMMENT_OR_STRING.sub(blank, text)


def _in_directive(text: str, pos: int) -> bool:
    """Whether offset `pos` is in a preprocessor directive (a logical line,
    spliced with backslashes, starting with #)."""
    start = text.rfind("\n", 0, pos) + 1
    while start > 1 and text[start - 2] == "\\":
        start = text.rfind("\n", 0, start - 1) + 1
    return text[start:pos].lstrip().startswith("#")


def _preprocess(text, label, defines, include_dirs, preprocessor, on_warning) -> _Preprocessed:
    if preprocessor not in PREPROCESSORS:
        raise LightNetError(f"unknown preprocessor '{preprocessor}' "
                            f"(expected one of {', '.join(PREPROCESSORS)})")
    if preprocessor == "auto":
        try:
            import pcpp  # noqa: F401
            preprocessor = "pcpp"
        except ImportError:
            preprocessor = "cpp" if shutil.which("cpp") else "pcpp"
    original = _blank_comments(text, label, escape_trigraphs=False)  # for columns
    text = _blank_comments(text, label)
    if preprocessor == "none":
        # Text a preprocessor already went through: its line markers are followed.
        pre = _follow_line_markers(text, label, label, original)
        pre.directives = False
        return pre
    if preprocessor == "pcpp":
        # pcpp knows `#line N "file"` only, not GNU's `# N "file" flags` markers.
        text = _GNU_LINE_MARKER.sub(r"\1line \2\3", text)
        out, top_key = _run_pcpp(text, label, defines, include_dirs, on_warning)
    else:
        out, top_key = _run_cpp(text, label, defines, include_dirs, on_warning)
    return _follow_line_markers(out, label, top_key, original)


_GNU_LINE_MARKER = re.compile(r'(?m)^(\s*#\s*)(\d+)(\s+"(?:[^"\\\n]|\\.)*")?[ \t\d]*$')

# `#line 12 "file"` (pcpp, C) or `# 12 "file" 1` (cpp); the file is optional.
_LINE_MARKER = re.compile(r'\s*#\s*(?:line\s+)?(\d+)(?:\s+"((?:[^"\\]|\\.)*)")?[\s\d]*\Z')
_PRAGMA = re.compile(r"\s*#\s*pragma\b")


def _follow_line_markers(out: str, label: str, top_key: str, top_text: str) -> _Preprocessed:
    """Blank out the line markers of preprocessed text, recording each line's origin."""
    lines = out.split("\n")
    origins = []
    key, line = top_key, 1
    for i, text in enumerate(lines):
        m = _LINE_MARKER.match(text) if text.lstrip().startswith("#") else None
        if m or _PRAGMA.match(text):
            lines[i] = ""
            origins.append((key, line))
            if m:
                line = int(m.group(1))
                if m.group(2) is not None:
                    key = re.sub(r"\\(.)", r"\1", m.group(2))
            continue
        origins.append((key, line))
        line += 1
    return _Preprocessed("\n".join(lines), origins, label, top_key, top_text)


def _run_pcpp(text, label, defines, include_dirs, on_warning) -> tuple[str, str]:
    try:
        import pcpp
    except ImportError:
        raise LightNetError("the IL preprocessor needs the pcpp package: "
                            f"{_PCPP_HINT} (or use the system cpp: --preprocessor cpp)") from None

    top_key = os.path.abspath(label)

    def display(path):
        return label if path == top_key else _display_path(path)

    class Preprocessor(il_limits.ExpansionLimit, pcpp.Preprocessor):
        # Every hook that meets a problem raises: the first error stops.
        def on_error(self, file, line, msg):
            msg = msg.strip()
            raise ILError(msg[:1].lower() + msg[1:], display(file), line)

        def _where(self):
            d = self.lastdirective
            return (display(d.source), d.lineno) if d is not None else (label,)

        def on_file_open(self, is_system_include, includepath):
            # An OSError tells pcpp to try the next directory.
            if self.include_depth > MAX_INCLUDE_DEPTH:
                raise ILError(f"#include nested more than {MAX_INCLUDE_DEPTH} deep "
                              "(does a file include itself?)", *self._where())
            with open(includepath, encoding="utf-8-sig") as f:
                try:
                    text = f.read()
                except UnicodeDecodeError:
                    raise ILError(f"#include: '{display(includepath)}' is not UTF-8 text",
                                  *self._where()) from None
            label = display(includepath)
            return io.StringIO(_pcpp_safe(_blank_comments(text, label), label))

        def on_include_not_found(self, is_malformed, is_system_include, curdir, includepath):
            if is_malformed:
                raise ILError(f"malformed #include: {includepath} "
                              '(expected #include "file")', *self._where())
            raise ILError(f"#include: file '{includepath}' not found", *self._where())

        def on_directive_unknown(self, directive, toks, ifpassthru, precedingtoks):
            name = directive.value
            rest = "".join(t.value for t in toks).strip()
            where = (display(directive.source), directive.lineno)
            if name == "error":
                raise ILError(f"#error {rest}".rstrip(), *where)
            if name == "warning":
                on_warning(f"{where[0]}:{where[1]}: #warning {rest}".rstrip())
                return True
            if name == "pragma":
                return True
            if name == "line":
                return None  # passed through: a line marker we follow
            raise ILError(f"unknown preprocessor directive '#{name}'", *where)

    p = Preprocessor()
    p.line_directive = "#line"
    for d in include_dirs:
        p.add_path(os.path.abspath(d))
    p.rewrite_paths = []  # file names stay absolute; display() shortens them
    for name, value in defines:
        p.define(f"{name} {value}")
    out = io.StringIO()
    try:
        p.parse(_pcpp_safe(text, label), label)
        p.write(out)
    except RecursionError:
        raise ILError("macro expansion or #include nested too deeply", label) from None
    except (IndexError, KeyError, TypeError, AttributeError, ValueError) as e:
        # pcpp's own failure on text it does not expect: still the source's error.
        raise ILError(f"the preprocessor (pcpp) cannot process this source: "
                      f"{type(e).__name__}: {e}", label) from e
    return out.getvalue(), top_key


# Directives pcpp fails on (an IndexError) when their argument is missing.
_NEEDS_ARGUMENT = re.compile(r"\s*#\s*(define|undef|ifdef|ifndef|if|elif)\s*\Z")
_BARE_PRAGMA = re.compile(r"\s*#\s*pragma\s*\Z")


def _pcpp_safe(text: str, label: str) -> str:
    """`text` (comments blanked) checked for the directives pcpp cannot take:
    one missing its macro name or expression is an error at its line, as cpp
    says; an empty `#pragma`, which means nothing, becomes an empty line."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        start, logical = i, lines[i]
        while logical.endswith("\\") and i + 1 < len(lines):  # a spliced directive
            i += 1
            logical = logical[:-1] + lines[i]
        m = _NEEDS_ARGUMENT.match(logical)
        if m:
            what = "an expression" if m.group(1) in ("if", "elif") else "a macro name"
            raise ILError(f"#{m.group(1)} without {what}", label, start + 1)
        if _BARE_PRAGMA.match(logical):
            lines[start:i + 1] = [""] * (i + 1 - start)
        i += 1
    return "\n".join(lines)


_CPP_DIAGNOSTIC = re.compile(r"(.*?):(\d+):(?:(\d+):)? (fatal error|error|warning): (.*)")


def _run_cpp(text, label, defines, include_dirs, on_warning) -> tuple[str, str]:
    exe = shutil.which("cpp")
    if exe is None:
        raise LightNetError(f"no C preprocessor: install pcpp ({_PCPP_HINT}) or cpp")
    base = os.path.dirname(label) if label not in ("<stdin>", "<string>") else ""
    cmd = [exe, "-undef", "-nostdinc", "-x", "c", "-fno-diagnostics-show-caret",
           "-iquote", base or "."]
    cmd += [f"-D{name}={value}" for name, value in defines]
    cmd += [f"-I{d}" for d in include_dirs]
    cmd.append("-")
    try:
        result = il_limits.run_cpp(cmd, text)
    except OSError as e:
        raise LightNetError(f"cannot run {exe}: {e.strerror}") from None
    except il_limits.OutputTooLarge:
        raise ILError(f"the preprocessed text is larger than "
                      f"{il_limits.MAX_PREPROCESSED_BYTES} bytes (the limit: does a macro "
                      "expand without end?)", label) from None

    def display(path):
        return label if path == "<stdin>" else _display_path(path)

    error = None
    for line in result.stderr.splitlines():
        m = _CPP_DIAGNOSTIC.match(line)
        if not m:
            continue
        file, lineno, col, kind, msg = m.groups()
        where = (display(file), int(lineno), int(col) if col else None)
        if kind == "warning" and msg.startswith("#warning"):
            on_warning(f"{where[0]}:{where[1]}: {msg}")
        elif kind != "warning" and error is None:
            error = ILError(msg, *where)
    if error is not None:
        raise error
    if result.returncode != 0:
        raise ILError(f"cpp failed: {result.stderr.strip() or f'exit status {result.returncode}'}",
                      label)
    return result.stdout, "<stdin>"


# ---------------------------------------------------------------------------
# Lexing


@dataclass(frozen=True)
class _Token:
    kind: str  # ident, number, string, punct, eof
    text: str  # the source text (punct: the character)
    value: object  # the number or the decoded string
    pos: int  # offset in the preprocessed text
    end: int


_SKIP = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)+", re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PP_NUMBER = re.compile(r"\.?[0-9](?:[eE][+-]|[0-9A-Za-z_.])*")
_NUMBER = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_PUNCT = "()|=,;[]:-"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "?": "?", "b": "\b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t"}


class _Parser:
    """Recursive descent over the tokens of preprocessed text."""

    def __init__(self, pre: _Preprocessed):
        self.pre = pre
        self.text = pre.text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        try:  # each ${eval} lies within its line: the lines stay where they were
            self.text = il_eval.substitute(self.text)
        except il_eval.EvalError as e:
            raise self.error(e.msg, e.pos) from None
        self.tokens = self._lex()
        self.i = 0

    # -- positions

    def where(self, pos: int) -> tuple[str, int, int]:
        """The original (file, line, column) of an offset in the preprocessed text."""
        index = bisect.bisect_right(self.line_starts, pos) - 1
        col = pos - self.line_starts[index]
        key, line = self.pre.origins[min(index, len(self.pre.origins) - 1)]
        pre_line = self.text[self.line_starts[index]:].partition("\n")[0]
        if pre_line.strip():
            col = _map_column(pre_line, self.pre.original_line(key, line), col)
        return self.pre.display(key), line, col + 1

    def error(self, msg: str, pos: int) -> ILError:
        return ILError(msg, *self.where(pos))

    # -- lexing

    def _lex(self) -> list[_Token]:
        text, tokens, pos = self.text, [], 0
        while True:
            m = _SKIP.match(text, pos)
            if m:
                pos = m.end()
            if pos >= len(text):
                # The end of the file is shown just after the last token.
                end = tokens[-1].end if tokens else 0
                tokens.append(_Token("eof", "", None, end, end))
                return tokens
            c = text[pos]
            if text.startswith("/*", pos):
                raise self.error("unterminated comment", pos)
            if m := _IDENT.match(text, pos):
                tokens.append(_Token("ident", m.group(), m.group(), pos, m.end()))
            elif m := _PP_NUMBER.match(text, pos):
                tokens.append(self._number(m.group(), pos))
            elif c == '"':
                tokens.append(self._string(pos))
            elif c in _PUNCT:
                tokens.append(_Token("punct", c, c, pos, pos + 1))
            elif c == "#" and not self.pre.directives:
                raise self.error("a preprocessor directive, but the preprocessor is off "
                                 "(--preprocessor none)", pos)
            elif c == "#":
                raise self.error("unexpected '#' (a preprocessor directive starts a line)", pos)
            elif c == "'":
                raise self.error("strings are written in double quotes", pos)
            else:
                raise self.error(f"unexpected character {_show_char(c)}", pos)
            pos = tokens[-1].end

    def _number(self, text: str, pos: int) -> _Token:
        if not _NUMBER.match(text):
            raise self.error(f"bad number '{text}'", pos)
        if any(c in text for c in ".eE"):
            value = float(text)
            if not math.isfinite(value):
                raise self.error(f"number out of range: '{text}'", pos)
        else:
            value = int(text)
            if value >= 2**1024:
                raise self.error(f"number out of range: '{text}'", pos)
        return _Token("number", text, value, pos, pos + len(text))

    def _string(self, start: int) -> _Token:
        text, out, pos = self.text, [], start + 1
        while True:
            if pos >= len(text) or text[pos] == "\n":
                raise self.error("unterminated string", start)
            c = text[pos]
            if c == '"':
                return _Token("string", text[start:pos + 1], "".join(out), start, pos + 1)
            if c != "\\":
                out.append(c)
                pos += 1
                continue
            e = text[pos + 1] if pos + 1 < len(text) else ""
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                pos += 2
            elif e == "u":
                code = self._hex4(pos)
                pos += 6
                if 0xD800 <= code < 0xDC00 and text.startswith("\\u", pos):
                    low = self._hex4(pos)
                    if 0xDC00 <= low < 0xE000:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        pos += 6
                if 0xD800 <= code < 0xE000:
                    raise self.error("\\u escape of a lone UTF-16 surrogate", pos - 6)
                out.append(chr(code))
            elif e in ("", "\n"):
                raise self.error("unterminated string", start)
            else:
                raise self.error(f"unknown escape '\\{e}' in a string "
                                 '(known: \\" \\\\ \\/ \\? \\b \\f \\n \\r \\t \\uXXXX)', pos)

    def _hex4(self, pos: int) -> int:
        digits = self.text[pos + 2:pos + 6]
        if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
            raise self.error("\\u must be followed by 4 hex digits", pos)
        return int(digits, 16)

    # -- parsing

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def next(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def is_punct(self, c: str) -> bool:
        tok = self.tokens[self.i]
        return tok.kind == "punct" and tok.text == c

    def expect(self, c: str, what: str) -> _Token:
        if not self.is_punct(c):
            tok = self.peek()
            raise self.error(f"expected '{c}' {what}, found {_show(tok)}", tok.pos)
        return self.next()

    def parse(self) -> list[dict]:
        ops, used, counters = [], set(), {}
        while self.peek().kind != "eof":
            if self.is_punct(";"):  # an empty statement
                self.next()
                continue
            name_tok, optype, op = self.statement()
            if name_tok is not None:
                name = name_tok.text
                if name in used:
                    raise self.error(f"op name '{name}' is used by an earlier op", name_tok.pos)
            else:
                n = counters.get(optype, 0) + 1
                while f"{optype}{n}" in used:
                    n += 1
                counters[optype] = n
                name = f"{optype}{n}"
            used.add(name)
            ops.append({"name": name, **op})
        return ops

    def statement(self):
        tok = self.next()
        if tok.kind != "ident":
            raise self.error(f"expected an op (optype(inputs | outputs | params);), "
                             f"found {_show(tok)}", tok.pos)
        name_tok = None
        if self.is_punct(":"):
            self.next()
            name_tok, tok = tok, self.next()
            if tok.kind != "ident":
                raise self.error(f"expected an optype after '{name_tok.text}:', "
                                 f"found {_show(tok)}", tok.pos)
        optype = tok.text
        self.expect("(", f"after '{optype}'")
        tensors_in = self.section(optype, "tensor", "input", "|")
        self.expect("|", "after the inputs")
        tensors_out = self.section(optype, "tensor", "output", "|")
        self.expect("|", "after the outputs")
        params = self.section(optype, "param", "param", ")")
        close = self.expect(")", "after the params")
        if not self.is_punct(";"):
            raise self.error(f"expected ';' after '{optype}(...)', found {_show(self.peek())}",
                             close.end)
        self.next()
        return name_tok, optype, {"optype": optype, "tensors_in": tensors_in,
                                  "tensors_out": tensors_out, "params": params}

    def section(self, optype: str, kind: str, what: str, closer: str) -> list[dict]:
        items, seen = [], set()
        while not self.is_punct(closer):
            tok = self.next()
            if tok.kind != "ident":
                raise self.error(f"expected {'a' if what == 'param' else 'an'} {what} name "
                                 f"or '{closer}', found {_show(tok)}"
                                 + (_SECTIONS_HINT if tok.text == ")" else ""), tok.pos)
            if tok.text in seen:
                raise self.error(f"{what} '{tok.text}' is given twice", tok.pos)
            seen.add(tok.text)
            self.expect("=", f"after {what} '{tok.text}'")
            if kind == "tensor":
                value = self.next()
                if value.kind not in ("ident", "string") or value.value == "":
                    raise self.error(f"expected a tensor name (an identifier or a string) "
                                     f"for {what} '{tok.text}', found {_show(value)}", value.pos)
                items.append({"arg_name": tok.text, "name": value.value})
            else:
                items.append({"arg_name": tok.text, "value": self.value(tok.text)})
            if self.is_punct(","):
                self.next()
            elif not self.is_punct(closer):
                after = self.peek()
                raise self.error(f"expected ',' or '{closer}' after {what} '{tok.text}', "
                                 f"found {_show(after)}"
                                 + (_SECTIONS_HINT if after.text == ")" else ""), after.pos)
        return items

    def value(self, param: str, in_array: bool = False):
        tok = self.next()
        if tok.kind == "number":
            return tok.value
        if tok.kind == "punct" and tok.text == "-":
            number = self.next()
            if number.kind != "number":
                raise self.error(f"expected a number after '-', found {_show(number)}",
                                 number.pos)
            return -number.value
        if tok.kind == "string":
            return tok.value
        if tok.kind == "ident" and tok.text in _LITERALS:
            value = _LITERALS[tok.text]
            if value is None and in_array:
                raise self.error(f"param '{param}': null is not allowed in an array", tok.pos)
            return value
        if tok.kind == "punct" and tok.text == "[":
            if in_array:
                raise self.error(f"param '{param}': nested arrays are not allowed", tok.pos)
            return self.array(param, tok)
        if tok.kind == "ident" and not in_array:
            return tok.text  # a bare name is a string, as LightNet's il2json reads it
        if tok.kind == "ident":
            raise self.error(f"bad value '{tok.text}' in the array of param '{param}': "
                             'expected a number, a "string", true or false', tok.pos)
        raise self.error(f"expected a value for param '{param}', found {_show(tok)}", tok.pos)

    def array(self, param: str, open_tok: _Token) -> list:
        values, first_type = [], None
        while not self.is_punct("]"):
            pos = self.peek().pos
            value = self.value(param, in_array=True)
            vtype = _TYPE_NAMES[type(value)]
            if first_type is None:
                first_type = vtype
            elif vtype != first_type:
                raise self.error(f"param '{param}': the elements of an array must have one "
                                 f"type, found {vtype} after {first_type}", pos)
            values.append(value)
            if self.is_punct(","):
                self.next()
            elif not self.is_punct("]"):
                tok = self.peek()
                raise self.error(f"expected ',' or ']' in the array of param '{param}', "
                                 f"found {_show(tok)}", tok.pos)
        self.next()
        return values


_LITERALS = {"true": True, "false": False, "null": None}
_TYPE_NAMES = {int: "a number", float: "a number", str: "a string", bool: "a bool"}
_SECTIONS_HINT = " (an op has three sections: inputs | outputs | params)"


def _show(tok: _Token) -> str:
    if tok.kind == "eof":
        return "the end of the file"
    text = tok.text if len(tok.text) <= 30 else tok.text[:27] + "..."
    return f"'{text}'"


def _show_char(c: str) -> str:
    return f"'{c}'" if c.isprintable() else f"U+{ord(c):04X}"


def _map_column(pre: str, orig: str | None, col: int) -> int:
    """The column in the original line of column `col` of its preprocessed text.

    Preprocessing expands macros and may change spaces; matching the two
    lines (runs of at least 4 equal characters) keeps columns exact outside
    expansions. A column in an expansion points just after the text matched
    before it, often the macro's name, or at the start of the line.
    """
    if orig is None or pre == orig:
        return col
    matcher = difflib.SequenceMatcher(None, pre, orig, autojunk=False)
    mapped = len(orig) - len(orig.lstrip())
    for a, b, size in matcher.get_matching_blocks():
        if size < 4 and not (size and a + size == len(pre) and b + size == len(orig)):
            continue
        if a <= col < a + size:
            return b + col - a
        if a + size <= col:
            mapped = b + size
    return mapped


# ---------------------------------------------------------------------------
# The il2json command


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="il2json",
        description="Convert a LightNet IL model (C-preprocessed) to the JSON IR.",
    )
    p.add_argument("source", metavar="MODEL.net", help="the IL source; - reads standard input")
    p.add_argument("-o", "--outfile", metavar="OUT",
                   help="write the IR to OUT (default: standard output)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a macro (repeatable)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="search DIR for #include files (repeatable)")
    p.add_argument("--preprocessor", choices=PREPROCESSORS, default="auto",
                   help="pcpp (pure Python), cpp (the system one), none, or auto "
                        "(pcpp if installed, else cpp; the default)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    for d in args.defines:
        if not _MACRO_NAME.match(d.partition("=")[0]):
            p.error(f"argument -D: bad macro definition '{d}' (expected NAME[=VALUE])")

    def warn(message):
        print(f"il2json: warning: {message}", file=sys.stderr)

    def convert():
        if args.source == "-":
            source, filename = sys.stdin.read(), "<stdin>"
        else:
            source, filename = Path(args.source), args.source
        doc = to_ir(source, filename=filename, defines=args.defines,
                    include_dirs=args.include_dirs, preprocessor=args.preprocessor,
                    on_warning=warn)
        text = format_ir(doc)
        if args.outfile and args.outfile != "-":
            try:
                with open(args.outfile, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as e:
                raise LightNetError(f"{args.outfile}: cannot write: {e.strerror}") from None
        else:
            sys.stdout.write(text)
            sys.stdout.flush()

    return report_errors("il2json", args.debug, convert)


if __name__ == "__main__":
    sys.exit(main())
