"""The description model: frozen dataclasses holding validated descriptions.

Everything the templates need is decided while loading (generator.model); the
format is specified in docs/op-description.md, docs/optimizer-description.md
and docs/arch-description.md.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

DTYPES = ("TL_DOUBLE", "TL_FLOAT", "TL_INT32", "TL_INT16", "TL_INT8",
          "TL_UINT32", "TL_UINT16", "TL_UINT8", "TL_BOOL")
# The arch of abstract ops: what an op computes, checked but never run. It is no
# architecture (nothing runs there), so it has no description in descriptions/archs/.
ABSTRACT = "none"
MTYPES = ("none", "cpu")
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
    min_ndim: int | None  # at least this many dimensions
    len: str | None  # a literal number is declared data; an expression is checked by code
    sametype: str | None
    sameshape: str | None
    static: bool | None
    optional: bool
    variadic: bool
    min: int
    checks: tuple[Check, ...]
    group_checks: int = 0  # its first checks are its param groups', made by their verifiers


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
    # The param group declaring it, whose verifier makes its first `group_checks` checks
    # (the group's), when the op makes them in its own pre_run.
    group: str | None = None
    group_checks: int = 0

    @property
    def required(self) -> bool:
        return self.default is MISSING

    @property
    def is_array(self) -> bool:
        return self.ptype.endswith("[]")


@dataclass(frozen=True)
class ParamGroup:
    """A named group of params of descriptions/params.yaml, which ops take
    whole (`param_groups: [name]`)."""

    name: str
    doc: str
    extends: str | None  # the group whose params it takes, some given anew
    params: tuple[ParamDesc, ...]
    # Of each param, its index in the extended group when it is that group's own.
    inherited: tuple[int | None, ...]
    origins: tuple[str, ...]  # of each param, the group declaring it
    items: tuple[dict, ...]  # the params as written, for the ops taking the group
    # The inputs of the ops taking it that its checks read (its own and its extended's).
    reads: tuple[str, ...] = ()
    # Its own checks of an op taking it, after its params': (label, check), the label
    # "op", "tensor_in 'name'" of an input it reads or "param 'name'" of its param. Its verifier makes them, after
    # those of the group it extends.
    checks: tuple[tuple[str, Check], ...] = ()
    verifies: bool = False  # it or a group it extends has checks of its own


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
    param_groups: tuple[str, ...]  # the groups whose params it takes first (its parent's not)
    inherits: str | None
    base: str | None  # the op whose pre_run this one's runs first (its parent, unless it drops checks)
    tensors_in: tuple[TensorIn, ...]
    tensors_out: tuple[TensorOut, ...]
    params: tuple[ParamDesc, ...]
    checks: tuple[Check, ...]
    # The input whose dtype it checks is one its arch computes in (ArchDesc.checked_input).
    dtype_checked: str | None
    pre_run: str | None
    pre_run_names: tuple[str, ...]  # names the pre_run code assigns; kept for run
    static_run: str | None
    run: str | None
    post_run: str | None
    examples: tuple[Example, ...]
    assemble: tuple[str, str, str] | None  # (output, variadic input, axis param)
    scratch: str | None  # bytes of per-run scratch memory the memory plan gives the op
    own: "OwnChecks"  # what this op's generated pre_run checks (its parent's run first)
    # It converts between dtypes: its arch's dtype rule (ArchDesc.checked_input) does not
    # apply to it, nor to the expanders lowering it.
    converts: bool = False
    group_checks: int = 0  # its first `checks` are its param groups', made by their verifiers
    # The arch template whose scratch and run code it runs as given (none of it its
    # own): its hooks are the template's, generated once (lightnet/auto/templates.py).
    template: str | None = None

    @property
    def runnable(self) -> bool:
        return self.arch != "none"


@dataclass(frozen=True)
class OwnChecks:
    """The part of an op's checks its own pre_run makes: all of them for an
    op without a base; for a variant, the params and inputs it adds (whole),
    the checks it adds to its parent's args, outputs and op, and the outputs it
    adds, which its pre_run defines after its parent's (a max pool's indices)."""

    params: tuple[ParamDesc, ...]
    tensors_in: tuple[TensorIn, ...]
    dtype_checked: bool  # whether it checks the op's dtype_checked (before its checks)
    checks: tuple[Check, ...]
    out_checks: tuple[tuple[str, Check], ...]  # (output, check)
    tensors_out: tuple[TensorOut, ...] = ()  # the outputs a variant adds
    groups: tuple[str, ...] = ()  # the param groups whose verifiers it calls (checks)


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

    @property
    def plain(self) -> bool:
        """Whether it is the op `like` as another optype, nothing else differing."""
        return (self.optype is not None and self.like is not None
                and not (self.name or self.ins or self.outs or self.params or self.rename))


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

    @property
    def plain(self) -> bool:
        """Whether it puts one plain op (NewOp.plain) in place, making nothing else:
        a lowering needing no Builder (OpView.as_optype)."""
        return (not self.tensors and not self.constants and len(self.replace) == 1
                and self.replace[0].plain)


@dataclass(frozen=True)
class Expander:
    optype: str
    # What every rule needs first: the op's first input has a dtype the arch computes
    # in (None: the arch computes in every dtype the op accepts).
    guard: str | None
    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class Combiner:
    name: str
    doc: str
    window: tuple[str, ...]
    rule: Rule


@dataclass(frozen=True)
class ArchDesc:
    """One file of descriptions/archs: an architecture ops run on."""

    name: str
    doc: str
    source: str
    library: str  # what its errors call it: "oneDNN runs TL_FLOAT"
    mtype: str  # the memory type of its ops unless one says otherwise
    dtypes: tuple[str, ...]  # the dtypes its ops compute in (every dtype: no restriction)
    dtype_set: str | None  # the name of a set of descriptions/types.yaml, when one
    fallback: str | None  # the arch that lowers what this one does not take
    float32_ops: tuple[str, ...]  # its ops that compute in float32 in any precision
    # Its element-wise ops: in a reduced precision they compute in what they read.
    elementwise_ops: tuple[str, ...]
    # Named snippets its op variants share (`template: NAME`): key -> YAML value.
    templates: dict[str, dict]
    # The module defining its Arch (ARCH), when not lightnet.archs.<name>.arch.
    package: str | None = None

    @property
    def restricts(self) -> bool:
        """Whether its ops compute in fewer dtypes than a description may accept."""
        return set(self.dtypes) != set(DTYPES)

    def checked_input(self, ins: tuple[TensorIn, ...]) -> TensorIn | None:
        """The input whose dtype an op of this arch (or an expander to it) must
        check: the first, which the outputs' dtype follows, when it may have a
        dtype the arch does not compute in."""
        if ins and not set(ins[0].dtype or DTYPES) <= set(self.dtypes):
            return ins[0]
        return None

    def dtype_check(self, tensor: str) -> tuple[str, str]:
        """The expression that `tensor` (an entry, or an OpView input) has a
        dtype this arch computes in, and why it must."""
        if len(self.dtypes) == 1:
            expr = f"{tensor}.dtype == DType.{self.dtypes[0]}"
        else:
            expr = f"{tensor}.dtype in ({', '.join(f'DType.{d}' for d in self.dtypes)})"
        return expr, f"{self.library} runs {' or '.join(self.dtypes)}"


@dataclass(frozen=True)
class Optimizer:
    """One file of descriptions/optimizers: an arch's expanders and combiners."""

    arch: ArchDesc
    doc: str
    source: str
    expanders: tuple[Expander, ...]
    combiners: tuple[Combiner, ...]


@dataclass(frozen=True)
class Descriptions:
    dtype_sets: dict[str, tuple[str, ...]]
    param_groups: tuple[ParamGroup, ...]
    archs: tuple[ArchDesc, ...]
    families: tuple[Family, ...]
    optimizers: tuple[Optimizer, ...]

    def ops(self):
        return [op for family in self.families for op in family.ops]
