"""How much structure an input may ask LightNet to read: nesting depth, number
of ops, string lengths. A model beyond them is refused with one line naming
the limit, before the work it would cost (a JSON document nested 100,000
deep would otherwise exhaust Python's stack; a name of a gigabyte would be
copied into every message). Every limit is far above what a real model
needs; docs/errors.md lists them.

And how much work evaluating a model before it runs may cost: the fold limit
(FoldBudget). What is past it is computed when the model runs instead, where
the memory limit applies; an ONNX node the importer can map only with a shape
or value folding would have computed (a Reshape to a computed shape) is
refused, its error saying that the limit ran out (FoldBudget.explain).
"""

from __future__ import annotations

import re

from lightnet.compiler.memory_plan import parse_size
from lightnet.errors import LightNetError

# Brackets ([ and {) open at once in a JSON IR document. A model needs 5:
# {"ops": [{"params": [{"value": [...]}]}]}.
MAX_JSON_DEPTH = 64
# Ops in one model (the IR from any source). The largest real networks have
# a few thousand; planning memory is quadratic in them.
MAX_OPS = 100_000
# Characters of a name: an op, optype, tensor or argument name.
MAX_NAME_LENGTH = 1024
# Characters of a string param value.
MAX_STRING_LENGTH = 65_536

# Elements that evaluating constants before the run (the ONNX importer's constant
# folding and the shape inference between its rounds; a compiler rule's folding of
# weights) may touch in one import or compile, every input and output counted: a few
# seconds of numpy work. A 3-node model can ask for a reduction of 10**12 elements;
# torchvision's Swin3D-T folds 186M computing its shifted windows' attention masks.
DEFAULT_FOLD_LIMIT = 1 << 28
# A fold touching at most this many elements is a shape computation's (a Shape,
# Gather, Concat chain), which the importer may need to map a node at all. A larger
# one (a mask, a weight) only saves the run some work, so it may spend no more than
# half the limit: however many of those come first, the small ones still fold.
SMALL_FOLD = 4096

# A JSON string (skipped: brackets inside it do not nest) or a bracket.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def check_json_depth(text: str, label: str) -> None:
    """Refuse JSON text nesting more than MAX_JSON_DEPTH brackets (before
    json.loads, which recurses once per bracket)."""
    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                raise LightNetError(f"{label}:{line}: the JSON nests more than "
                                    f"{MAX_JSON_DEPTH} brackets deep (the limit)")
        elif c in "]}":
            depth -= 1


def check_op_count(count: int, label: str) -> None:
    if count > MAX_OPS:
        raise LightNetError(f"{label}: the model has {count} ops, more than the limit of "
                            f"{MAX_OPS}")


def name_problem(value: str) -> str | None:
    """What is wrong with the length of a name, if anything."""
    if len(value) > MAX_NAME_LENGTH:
        return (f"expected a name of at most {MAX_NAME_LENGTH} characters (the limit), "
                f"found {len(value)}")
    return None


def string_problem(value: str) -> str | None:
    """What is wrong with the length of a string param value, if anything."""
    if len(value) > MAX_STRING_LENGTH:
        return (f"strings must have at most {MAX_STRING_LENGTH} characters (the limit), "
                f"found {len(value)}")
    return None


class FoldBudget:
    """The elements evaluation before the run may still touch (DEFAULT_FOLD_LIMIT,
    or `fold_limit`: Context, Session, convert, --fold-limit). An op whose
    evaluation would touch more than is left is not evaluated: it stays an op of
    the model, computed when the model runs."""

    def __init__(self, limit: int | None = None):
        self.limit = DEFAULT_FOLD_LIMIT if limit is None else limit
        self.left = self.limit

    def take(self, elements: int) -> bool:
        """Spend `elements` if that many are left (beyond the half of the limit kept
        for small folds, for a fold larger than SMALL_FOLD)."""
        kept = 0 if elements <= SMALL_FOLD else self.limit // 2
        if elements > self.left - kept:
            return False
        self.left -= elements
        return True

    def explain(self, message: str) -> str:
        """`message`, an error about a shape or value this budget had no room to
        compute before the run, with what ran out and how to raise it: the error
        alone does not tell that a larger limit would avoid it."""
        return (f"{message}: the fold limit ({self.limit} elements) ran out before it "
                "could be computed; raise it with --fold-limit or fold_limit=")


def parse_fold_limit(value) -> int | None:
    """A fold limit as given (None: the default; an int, or a string like `64M`):
    a number of elements, or a LightNetError naming what was found."""
    if value is None:
        return None
    try:
        return parse_size(value, unit="elements")
    except ValueError as e:
        raise LightNetError(f"fold limit: {e}") from None
