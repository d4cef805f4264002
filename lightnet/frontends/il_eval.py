"""`${eval EXPR}` in IL text: constant arithmetic, as LightNet's il2json computes it.

LightNet's il2json hands the text of EXPR to Perl's `eval`; this is a small
recursive-descent parser of the arithmetic part of that language instead (the
text of a model is never executed):

    eval    = "${eval" SPACE expr "}"
    expr    = term { ("+" | "-") term }
    term    = unary { ("*" | "/" | "%") unary }
    unary   = ("-" | "+") unary | power
    power   = primary [ "**" unary ]          (right-associative: 2**3**2 is 512)
    primary = NUMBER | "(" expr ")" | eval

As in Perl, `/` divides exactly (7/2 is 3.5), `%` takes the integer parts of
its operands and gives the sign of the right one, and `-2**2` is -4. The
result is an int when it is integral, else a float with Perl's 15 significant
digits (0.1+0.2 is 0.3).

    value, end = evaluate(text, pos)   # text[pos:] starts with "${eval"
    text = substitute(text)            # every ${eval ...} replaced by its value

A `${eval ...}` lies within one line.
"""

from __future__ import annotations

import math
import re

PREFIX = "${eval"

_SPACE = re.compile(r"[ \t\r\f\v]*")  # within the line, as il2json's per-line match
_NUMBER = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class EvalError(ValueError):
    """A bad `${eval ...}`: the message and the offset in the text it is about."""

    def __init__(self, msg: str, pos: int):
        super().__init__(msg)
        self.msg = msg
        self.pos = pos


def evaluate(text: str, pos: int) -> tuple[int | float, int]:
    """The value of the `${eval ...}` at `text[pos:]` and the offset after its `}`."""
    parser = _Parser(text)
    value = parser.eval_block(pos)
    return _result(value, pos), parser.pos


def substitute(text: str) -> str:
    """`text` with every `${eval ...}` replaced by its value's text, as
    il2json does, so one may stand anywhere: in a number, a name
    (`conv${eval N + 1}`) or a string."""
    out, last = [], 0
    start = text.find(PREFIX)
    while start >= 0:
        value, end = evaluate(text, start)
        out += [text[last:start], str(value)]
        last = end
        start = text.find(PREFIX, end)
    return "".join(out) + text[last:]


def _result(value: float, pos: int) -> int | float:
    if not math.isfinite(value):
        raise EvalError("${eval}: the result is not a finite number", pos)
    value = float(f"{value:.15g}")
    return int(value) if value.is_integer() else value


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()

    def at(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def found(self) -> str:
        if self.pos >= len(self.text) or self.text[self.pos] == "\n":
            return "the end of the line"
        return f"'{self.text[self.pos]}'"

    def eval_block(self, start: int) -> float:
        self.pos = start + len(PREFIX)
        if self.text[self.pos:self.pos + 1] not in (" ", "\t"):
            raise EvalError(f"expected a space after '{PREFIX}'", self.pos)
        value = self.expr()
        if not self.at("}"):
            raise EvalError(f"${{eval}}: expected an operator or '}}', found {self.found()}",
                            self.pos)
        self.pos += 1
        return value

    def expr(self) -> float:
        value = self.term()
        while True:
            if self.at("+"):
                self.pos += 1
                value = value + self.term()
            elif self.at("-"):
                self.pos += 1
                value = value - self.term()
            else:
                return value

    def term(self) -> float:
        value = self.unary()
        while True:
            if self.at("*"):
                self.pos += 1
                value = value * self.unary()
            elif self.at("/"):
                where = self.pos
                self.pos += 1
                divisor = self.unary()
                if divisor == 0:
                    raise EvalError("${eval}: division by zero", where)
                value = value / divisor
            elif self.at("%"):
                where = self.pos
                self.pos += 1
                divisor = self.unary()
                if math.trunc(divisor) == 0:
                    raise EvalError("${eval}: modulus by zero", where)
                value = math.trunc(value) % math.trunc(divisor)
            else:
                return value

    def unary(self) -> float:
        if self.at("-"):
            self.pos += 1
            return -self.unary()
        if self.at("+"):
            self.pos += 1
            return self.unary()
        return self.power()

    def power(self) -> float:
        base = self.primary()
        if not self.at("**"):
            return base
        where = self.pos
        self.pos += 2
        exponent = self.unary()
        try:
            value = math.pow(base, exponent)
        except (OverflowError, ValueError):
            raise EvalError(f"${{eval}}: {base!r} ** {exponent!r} is not a finite number",
                            where) from None
        return value

    def primary(self) -> float:
        self.skip()
        if self.text.startswith(PREFIX, self.pos):
            return self.eval_block(self.pos)
        if self.at("("):
            self.pos += 1
            value = self.expr()
            if not self.at(")"):
                raise EvalError(f"${{eval}}: expected ')', found {self.found()}", self.pos)
            self.pos += 1
            return value
        m = _NUMBER.match(self.text, self.pos)
        if m is None:
            raise EvalError(f"${{eval}}: expected a number, '(' or '-', found {self.found()}",
                            self.pos)
        self.pos = m.end()
        value = float(m.group())
        if not math.isfinite(value):
            raise EvalError(f"${{eval}}: number out of range: '{m.group()}'", m.start())
        return value
