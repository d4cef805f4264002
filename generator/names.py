"""Names in description expressions and code snippets.

Every expression and snippet is parsed once, and every name it reads must be
an argument of its op, a name defined earlier, or one of the globals the
generated code provides; an error points at the key's line.
"""

from __future__ import annotations

import ast
import builtins
import keyword
from contextvars import ContextVar

from generator.fields import Fields
from generator.schema import MISSING, Check
from generator.source import DescriptionError, YMap

# Names every description expression may use besides its op's own arguments.
GLOBALS = frozenset({"shapes", "kernels", "dnnl", "np", "math", "DType"})
BUILTINS = frozenset(dir(builtins))
# Names lightnet.nn (its generated builder functions, lightnet/auto/nn.py, and
# what lightnet/nn.py adds) uses for itself: no optype or argument may take one.
NN_NAMES = frozenset({"name", "apply", "Tensor", "Action", "Sequence", "Literal", "Model",
                      "constant"})
# Names the generated functions use for themselves: an argument (or a name
# pre_run assigns) called like one of them would break the generated code.
RESERVED = GLOBALS | NN_NAMES | frozenset({
    "ck", "op", "tensors", "arrays", "priv", "run", "found", "scratch",
    "Checker", "OpProto", "ParamArg", "TensorArg", "ParamType", "MemType",
})
# Names the generated optimizer functions use: a rule's tensors and constants
# must be named otherwise.
RULE_RESERVED = GLOBALS | frozenset({
    "ctx", "window", "target", "op", "ops", "b", "Builder", "OpView", "Combiner",
    "FLOAT32_OPS", "ELEMENTWISE_OPS", "ARCHS",
})
# The op lists of the optimizer's arch (descriptions/archs), which its rules' conditions
# may read.
RULE_OP_LISTS = ("FLOAT32_OPS", "ELEMENTWISE_OPS")
# Builtins hidden in the op being validated: its own arguments and pre_run
# names are locals of the generated functions, so e.g. a param `max` makes
# `max(...)` in an earlier param's check an unbound local, not the builtin.
HIDDEN: ContextVar[frozenset] = ContextVar("hidden_builtins", default=frozenset())


def names_read(tree) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def bindings(tree) -> tuple[list[str], set[str]]:
    """The names a snippet binds in its own scope (in order), and the names
    bound only inside its comprehensions, lambdas, functions and classes
    (which are defined there, but are not names the snippet keeps)."""
    top: list[str] = []
    inner: set[str] = set()

    def bind(name: str, nested: bool) -> None:
        if nested:
            inner.add(name)
        elif name not in top:
            top.append(name)

    def visit(node, in_func: bool, in_comp: bool) -> None:
        nested = in_func or in_comp
        if isinstance(node, ast.NamedExpr):  # binds in the enclosing function scope
            bind(node.target.id, in_func)
            visit(node.value, in_func, in_comp)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bind(node.id, nested)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name, nested)
            in_func = True
        elif isinstance(node, ast.Lambda):
            in_func = True
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            in_comp = True
        elif isinstance(node, ast.arg):
            inner.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bind((alias.asname or alias.name).split(".")[0], nested)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, nested)
        for child in ast.iter_child_nodes(node):
            visit(child, in_func, in_comp)

    visit(tree, False, False)
    return top, inner


def parse(text: str, mode: str, fields: Fields, key: str):
    try:
        return ast.parse(text, mode=mode)
    except SyntaxError as e:
        file, line, path = fields.where(key)
        if mode == "exec" and isinstance(fields.map, YMap):
            line = fields.map.text_line(key) + (e.lineno or 1) - 1
        what = "expression" if mode == "eval" else "code"
        raise DescriptionError(file, line,
                               path, f"invalid Python {what}: {e.msg}: {text.strip()[:60]!r}") from None


def check_names(tree, known, fields: Fields, key: str, local=()) -> tuple[str, ...]:
    """The argument names `tree` reads; error on a name that is nowhere defined."""
    read = names_read(tree)
    top, inner = bindings(tree)
    hidden = HIDDEN.get()
    unknown = sorted(read - set(known) - set(local) - set(top) - inner - GLOBALS
                     - (BUILTINS - hidden))
    if unknown:
        name = unknown[0]
        why = (f"; this op's own '{name}' hides the builtin, and is not defined here"
               if name in hidden else "")
        raise fields.error(key, f"unknown name '{name}' (known here: "
                           f"{', '.join(sorted(known)) or 'none'}, and {', '.join(sorted(GLOBALS))}"
                           f"{why})")
    return tuple(n for n in known if n in read)


def expression(fields: Fields, key: str, known, default=MISSING, allow_number=False):
    """An expression field: a Python expression string (or a number literal)."""
    kinds = (str, int, float) if allow_number else str
    value = fields.get(key, kinds, default)
    if value is default and default is not MISSING:
        return value
    text = str(value)
    check_names(parse(text, "eval", fields, key), known, fields, key)
    return text


def snippet(fields: Fields, key: str, known) -> tuple[str | None, list[str]]:
    """A code snippet and the names it assigns."""
    text = fields.get(key, str, None)
    if text is None:
        return None, []
    tree = parse(text, "exec", fields, key)
    if not tree.body:  # empty, or only comments: no code (it would render no statement)
        return None, []
    stored, _ = bindings(tree)
    check_names(tree, known, fields, key)
    return text.rstrip() + "\n", stored


def read_checks(fields: Fields, known) -> tuple[Check, ...]:
    checks = []
    for value, path, line in fields.items("checks"):
        f = Fields(value, fields.file, path, line)
        expr = f.get("expr", str)
        names = check_names(parse(expr, "eval", f, "expr"), known, f, "expr")
        checks.append(Check(expr, f.get("msg", str, None), names))
        f.done()
    return tuple(checks)


def identifier(fields: Fields, key: str) -> str:
    name = fields.get(key, str)
    if not name.isidentifier() or keyword.iskeyword(name):
        raise fields.error(key, f"'{name}' is not a valid Python identifier")
    if name in RESERVED:
        raise fields.error(key, f"'{name}' is reserved: the generated code uses that name")
    return name
