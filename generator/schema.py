"""The description model: frozen dataclasses holding validated descriptions.

Everything the templates need is decided while loading (generator.model); the
format is specified in docs/op-description.md and docs/optimizer-description.md.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

DTYPES = ("TL_DOUBLE", "TL_FLOAT", "TL_INT32", "TL_INT16", "TL_INT8",
          "TL_UINT32", "TL_UINT16", "TL_UINT8", "TL_BOOL")
ARCHS = ("none", "cpu", "dnnl")
MTYPES = ("none", "cpu")
# The memory type of an arch's ops unless a description says otherwise: oneDNN's CPU
# engine works on host memory, so dnnl ops share the cpu arena.
ARCH_MTYPES = {"none": "none", "cpu": "cpu", "dnnl": "cpu"}
# Param types: a scalar, or an array of one (`int[]`, `int[2]`, `int[src.ndim]`);
# int, float and double are numbers typed so; a list of strings is an enum.
SCALAR_TYPES = {"int": ("number", "int"), "float": ("number", "float"),
                "double": ("number", "double"), "string": ("string", None),
                "bool": ("bool", None), "null": ("null", None)}
BOUNDS = ("eq", "ne", "gt", "ge", "lt", "le")
MISSING = object()  # the default of a field that has none: it is required


@dataclass(frozen=True)
class Check:
    """A condition an op's arguments must satisfy, with an optional explanation."""

    expr: str
    msg: str | None
    names: tuple[str, ...]  # the argument names it reads, shown when it fails


@dataclass(frozen=True)
class TensorIn:
    arg_name: str
    doc: str
    dtype: tuple[str, ...]  # accepted dtypes; empty: any
    dtype_set: str | None  # the name of a set of descriptions/types.yaml, when one
    ndim: int | None
    len: str | None  # a literal number is declared data; an expression is checked by code
    sametype: str | None
    sameshape: str | None
    static: bool | None
    optional: bool
    variadic: bool
    min: int
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class TensorOut:
    arg_name: str
    doc: str
    dtype: str  # a dtype name or an expression
    shape: str
    static: bool
    owner: str | None
    view: str | None
    from_file: str | None
    input: bool  # fed by the user (set_data / Session.run), kept alive the whole run
    checks: tuple[Check, ...]  # after the output is defined: may read it


@dataclass(frozen=True)
class Bound:
    rule: str  # eq, ne, gt, ge, lt, le
    value: str  # a Python expression (a literal is one too)

    @property
    def literal(self) -> bool:
        return is_number(self.value)


def is_number(text) -> bool:
    """Whether an expression is a number literal (declared data, not code)."""
    try:
        value = ast.literal_eval(str(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class ParamDesc:
    arg_name: str
    doc: str
    type: str  # as written: int, float[2], string[], ...; an enum is `string`
    ptype: str
    realtype: str | None
    default: object  # MISSING when required
    bounds: tuple[Bound, ...]
    len: str | None  # of an array: a literal is declared data, an expression code
    choices: tuple
    checks: tuple[Check, ...]

    @property
    def required(self) -> bool:
        return self.default is MISSING

    @property
    def is_array(self) -> bool:
        return self.ptype.endswith("[]")


@dataclass(frozen=True)
class Example:
    doc: str
    inputs: dict
    params: dict
    outputs: dict
    error: str | None


@dataclass(frozen=True)
class OpDesc:
    optype: str
    arch: str
    mtype: str
    doc: str
    inherits: str | None
    base: str | None  # the op whose pre_run this one's runs first (its parent, unless it drops checks)
    tensors_in: tuple[TensorIn, ...]
    tensors_out: tuple[TensorOut, ...]
    params: tuple[ParamDesc, ...]
    checks: tuple[Check, ...]
    pre_run: str | None
    pre_run_names: tuple[str, ...]  # names the pre_run code assigns; kept for run
    static_run: str | None
    run: str | None
    post_run: str | None
    examples: tuple[Example, ...]
    assemble: tuple[str, str, str] | None  # (output, variadic input, axis param)
    scratch: str | None  # bytes of per-run scratch memory the memory plan gives the op
    own: "OwnChecks"  # what this op's generated pre_run checks (its parent's run first)

    @property
    def runnable(self) -> bool:
        return self.arch != "none"


@dataclass(frozen=True)
class OwnChecks:
    """The part of an op's checks its own pre_run makes: all of them for an
    op without a base; for a variant, the params and inputs it adds (whole)
    and the checks it adds to its parent's args, outputs and op."""

    params: tuple[ParamDesc, ...]
    tensors_in: tuple[TensorIn, ...]
    checks: tuple[Check, ...]
    out_checks: tuple[tuple[str, Check], ...]  # (output, check)


@dataclass(frozen=True)
class Family:
    """One file of descriptions/ops: an abstract op and its arch variants."""

    name: str
    source: str
    ops: tuple[OpDesc, ...]


@dataclass(frozen=True)
class NewOp:
    """One op a rule puts in place: an optype, the op it starts from (`like`:
    its name, tensors and params), and expressions for what differs."""

    optype: str | None  # None: the optype of `like`
    like: str | None
    name: str | None
    ins: tuple[tuple[str, str], ...]
    outs: tuple[tuple[str, str], ...]
    params: tuple[tuple[str, str], ...]
    rename: tuple[tuple[str, str], ...]  # tensor -> tensor, in every arg of the op


@dataclass(frozen=True)
class Constant:
    """New weights a rule computes at compile time (constant folding): `expr`
    gives one array per name in `names` (a tuple when there are several)."""

    names: tuple[str, ...]
    expr: str


@dataclass(frozen=True)
class Rule:
    """`when` holds -> replace the matched op(s) by `replace` (empty: remove).
    `tensors` are fresh tensor names the new ops may create; `constants` new
    weights computed from known static data."""

    when: str | None
    tensors: tuple[str, ...]
    constants: tuple[Constant, ...]
    replace: tuple[NewOp, ...]


@dataclass(frozen=True)
class Expander:
    optype: str
    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class Combiner:
    name: str
    doc: str
    window: tuple[str, ...]
    rule: Rule


@dataclass(frozen=True)
class Optimizer:
    """One file of descriptions/optimizers: an arch's expanders and combiners."""

    arch: str
    doc: str
    source: str
    expanders: tuple[Expander, ...]
    combiners: tuple[Combiner, ...]
    fallback: str | None  # the arch that lowers what this one does not take
    float32_ops: tuple[str, ...] = ()  # its ops that compute in float32 in any precision
    # Its element-wise ops: in a reduced precision they compute in what they read.
    elementwise_ops: tuple[str, ...] = ()


@dataclass(frozen=True)
class Descriptions:
    dtype_sets: dict[str, tuple[str, ...]]
    families: tuple[Family, ...]
    optimizers: tuple[Optimizer, ...]

    def ops(self):
        return [op for family in self.families for op in family.ops]
