"""Invalid descriptions: one located error, exit 1, nothing written.

Each case adds or replaces description files in a copy of the generated base
tree. The offending line carries a `# <-` marker, so the expected line number
is computed from the text rather than counted by hand. The error must read
exactly `error: FILE:LINE: PATH: MESSAGE` (no path for invalid YAML).
"""

from __future__ import annotations

import re
import textwrap

import pytest

from genutil import run, snapshot, write_descriptions

ERROR = re.compile(r"error: (?P<file>[^:\n]+):(?P<line>\d+): (?:(?P<path>[^\s:]+): )?(?P<msg>.+)\n")


class Case:
    def __init__(self, id, text, path, message, file="descriptions/ops/bad.yaml", extra=None):
        self.id, self.file, self.path, self.message = id, file, path, message
        self.files = {file: textwrap.dedent(text), **(extra or {})}


# An op of the base tree to inherit from or collide with is not used unless a
# case says so: most cases live in descriptions/ops/bad.yaml.
CASES = [
    # Syntax and structure ------------------------------------------------------
    Case("yaml-syntax", """\
        bad:
          arch: none
          doc: [unclosed, list
          params: x   # <-
        """, None, "invalid YAML"),
    Case("yaml-key-twice", """\
        bad:
          arch: none
          arch: cpu   # <-
        """, "arch", "key given twice"),
    Case("op-not-a-mapping", """\
        bad: 3   # <-
        """, "bad", "expected a mapping, found an integer"),
    # Unknown keys ----------------------------------------------------------------
    Case("unknown-key-op", """\
        bad:
          arch: none
          colour: red   # <-
        """, "bad.colour", "unknown key 'colour'"),
    Case("unknown-key-tensor-in", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: src
              shape: x   # <-
        """, "bad.tensors_in[0].shape", "unknown key 'shape'"),
    Case("unknown-key-tensor-out", """\
        bad:
          arch: none
          tensors_out:
            - arg_name: dst
              dtype: TL_FLOAT
              shape: "(1,)"
              ndim: 1   # <-
        """, "bad.tensors_out[0].ndim", "unknown key 'ndim'"),
    Case("unknown-key-param", """\
        bad:
          arch: none
          params:
            - arg_name: a
              type: bool
              gte: 1   # <-
        """, "bad.params[0].gte", "unknown key 'gte'"),
    Case("unknown-key-check", """\
        bad:
          arch: none
          checks:
            - expr: "True"
              message: hi   # <-
        """, "bad.checks[0].message", "unknown key 'message'"),
    Case("unknown-key-example", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          examples:
            - inputs: {src: [1]}
              error: boom
              expected: 1   # <-
        """, "bad.examples[0].expected", "unknown key 'expected'"),
    # Missing required keys (the line of the mapping that lacks it) -------------------
    Case("missing-arch", """\
        bad:   # <-
          doc: no arch
        """, "bad", "'arch' is required"),
    Case("missing-arg-name", """\
        bad:
          arch: none
          tensors_in:
            - doc: no name   # <-
        """, "bad.tensors_in[0]", "'arg_name' is required"),
    Case("missing-type", """\
        bad:
          arch: none
          params:
            - {arg_name: a, type: bool}
            - {arg_name: b, doc: no type}   # <-
        """, "bad.params[1]", "'type' is required"),
    Case("missing-shape", """\
        bad:
          arch: none
          tensors_out:
            - arg_name: dst   # <-
              dtype: TL_FLOAT
        """, "bad.tensors_out[0]", "'shape' is required"),
    Case("missing-output-dtype", """\
        bad:
          arch: none
          tensors_out:
            - arg_name: dst   # <-
              shape: "(1,)"
        """, "bad.tensors_out[0]", "'dtype' is required"),
    Case("missing-check-expr", """\
        bad:
          arch: none
          checks:
            - msg: what   # <-
        """, "bad.checks[0]", "'expr' is required"),
    # Wrong YAML types ------------------------------------------------------------
    Case("type-ndim", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: src
              ndim: two   # <-
        """, "bad.tensors_in[0].ndim", "expected an integer, found a string"),
    Case("min-ndim-with-ndim", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: src
              ndim: 2
              min_ndim: 2   # <-
        """, "bad.tensors_in[0].min_ndim", "an input has an exact 'ndim' or a 'min_ndim', not both"),
    Case("min-ndim-zero", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: src
              min_ndim: 0   # <-
        """, "bad.tensors_in[0].min_ndim", "expected a number of dimensions >= 1, found 0"),
    Case("type-ndim-bool", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: src
              ndim: true   # <-
        """, "bad.tensors_in[0].ndim", "expected an integer, found a bool"),
    Case("type-static", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: src
              static: 1   # <-
        """, "bad.tensors_in[0].static", "expected true or false, found an integer"),
    Case("type-doc", """\
        bad:
          arch: none
          doc: [a, b]   # <-
        """, "bad.doc", "expected a string, found a list"),
    Case("type-arch", """\
        bad:
          arch: 1   # <-
        """, "bad.arch", "expected a string, found an integer"),
    Case("type-tensors-in", """\
        bad:
          arch: none
          tensors_in: src   # <-
        """, "bad.tensors_in", "expected a list, found a string"),
    Case("arg-spec-not-a-mapping", """\
        bad:
          arch: none
          tensors_in:
            src: [a, list]   # <-
        """, "bad.tensors_in.src", "expected a mapping, found a list"),
    Case("arg-name-given-twice", """\
        bad:
          arch: none
          params:
            a:
              arg_name: b   # <-
              type: bool
        """, "bad.params.a", "the argument's name is its key: no 'arg_name'"),
    Case("type-param-item", """\
        bad:
          arch: none
          params:
            - alpha   # <-
        """, "bad.params[0]", "expected a mapping, found a string"),
    Case("type-shape-number", """\
        bad:
          arch: none
          tensors_out:
            - arg_name: dst
              dtype: TL_FLOAT
              shape: 3   # <-
        """, "bad.tensors_out[0].shape", "expected a string, found an integer"),
    Case("type-run", """\
        bad:
          arch: cpu
          run: [a]   # <-
        """, "bad.run", "expected a string, found a list"),
    # Unknown names of the format ------------------------------------------------
    Case("unknown-dtype", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: src
              dtype: TL_HALF   # <-
        """, "bad.tensors_in[0].dtype", "unknown dtype 'TL_HALF'"),
    Case("unknown-dtype-in-list", """\
        bad:
          arch: none
          tensors_in:
            - {arg_name: src, dtype: [TL_FLOAT, TL_FLOAT16]}   # <-
        """, "bad.tensors_in[0].dtype", "unknown dtype 'TL_FLOAT16'"),
    Case("unknown-output-dtype-name", """\
        bad:
          arch: none
          tensors_out:
            - arg_name: dst
              dtype: TL_FLAOT   # <-
              shape: "(1,)"
        """, "bad.tensors_out[0].dtype", "unknown name 'TL_FLAOT'"),
    Case("unknown-type", """\
        bad:
          arch: none
          params:
            - arg_name: a
              type: long   # <-
        """, "bad.params[0].type", "unknown type 'long' (known: int, float, double, string, "
                                   "bool, null, an array of one: int[], int[2], int[src.ndim]; "
                                   "or a list of choices: [A, B])"),
    Case("unknown-type-array", """\
        bad:
          arch: none
          params:
            a: {type: "number[2]"}   # <-
        """, "bad.params.a.type", "unknown type 'number[2]'"),
    Case("null-array", """\
        bad:
          arch: none
          params:
            a: {type: "null[]"}   # <-
        """, "bad.params.a.type", "unknown type 'null[]'"),
    Case("unknown-arch", """\
        bad:
          arch: gpu   # <-
        """, "bad.arch", "unknown arch 'gpu'"),
    Case("unknown-mtype", """\
        bad:
          arch: cpu
          mtype: gpu   # <-
        """, "bad.mtype", "unknown mtype 'gpu'"),
    # Param rules -----------------------------------------------------------------
    Case("type-length-unknown-name", """\
        bad:
          arch: none
          params:
            a: {type: "int[n]"}   # <-
        """, "bad.params.a.type", "unknown name 'n'"),
    Case("type-length-invalid", """\
        bad:
          arch: none
          params:
            a: {type: "int[2 +]"}   # <-
        """, "bad.params.a.type", "invalid Python expression"),
    Case("type-not-a-string", """\
        bad:
          arch: none
          params:
            a: {type: 3}   # <-
        """, "bad.params.a.type", "expected a string or a list, found an integer"),
    Case("bound-on-string", """\
        bad:
          arch: none
          params:
            - arg_name: s
              type: string
              ge: 1   # <-
        """, "bad.params[0].ge", "bounds are for number params, not string"),
    Case("bound-on-bool-array", """\
        bad:
          arch: none
          params:
            - arg_name: s
              type: "bool[]"
              lt: 1   # <-
        """, "bad.params[0].lt", "bounds are for number params, not bool[]"),
    Case("len-key-on-param", """\
        bad:
          arch: none
          params:
            - arg_name: n
              type: "int[]"
              len: 2   # <-
        """, "bad.params[0].len", "unknown key 'len'"),
    Case("choices-key-on-param", """\
        bad:
          arch: none
          params:
            - arg_name: n
              type: string
              choices: [a, b]   # <-
        """, "bad.params[0].choices", "unknown key 'choices'"),
    Case("enum-not-strings", """\
        bad:
          arch: none
          params:
            s: {type: [a, 1]}   # <-
        """, "bad.params.s.type", "an enum type is a non-empty list of strings"),
    Case("enum-empty", """\
        bad:
          arch: none
          params:
            s: {type: []}   # <-
        """, "bad.params.s.type", "an enum type is a non-empty list of strings"),
    Case("default-string-for-number", """\
        bad:
          arch: none
          params:
            - arg_name: n
              type: int
              default: one   # <-
        """, "bad.params[0].default", "expected a number default, found a string"),
    Case("default-bool-for-number", """\
        bad:
          arch: none
          params:
            - {arg_name: n, type: double, default: true}   # <-
        """, "bad.params[0].default", "expected a number default, found a bool"),
    Case("default-scalar-for-array", """\
        bad:
          arch: none
          params:
            - arg_name: n
              type: "int[]"
              default: 3   # <-
        """, "bad.params[0].default", "expected a list for an int[] param"),
    Case("default-element-type", """\
        bad:
          arch: none
          params:
            - arg_name: n
              type: "string[]"
              default: [a, 2]   # <-
        """, "bad.params[0].default", "expected a string default, found an integer"),
    Case("default-fraction-for-int", """\
        bad:
          arch: none
          params:
            - arg_name: n
              type: int
              default: 0.5   # <-
        """, "bad.params[0].default", "expected an integer default (type int), found 0.5"),
    Case("default-not-a-choice", """\
        bad:
          arch: none
          params:
            - arg_name: s
              type: [a, b]
              default: c   # <-
        """, "bad.params[0].default", "default 'c' is not one of the choices"),
    # Names -------------------------------------------------------------------------
    Case("arg-name-not-identifier", """\
        bad:
          arch: none
          params:
            - arg_name: 2x   # <-
              type: bool
        """, "bad.params[0].arg_name", "'2x' is not a valid Python identifier"),
    Case("arg-name-keyword", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: lambda   # <-
        """, "bad.tensors_in[0].arg_name", "'lambda' is not a valid Python identifier"),
    Case("arg-name-reserved", """\
        bad:
          arch: none
          params:
            - {arg_name: ck, type: bool}   # <-
        """, "bad.params[0].arg_name", "'ck' is reserved"),
    Case("pre-run-assigns-reserved", """\
        bad:
          arch: none
          pre_run: |   # <-
            op = None
        """, "bad.pre_run", "pre_run assigns 'op'"),
    Case("optype-not-identifier", """\
        bad-op:   # <-
          arch: none
        """, "bad-op", "an optype must be a Python identifier"),
    Case("duplicate-inputs", """\
        bad:
          arch: none
          tensors_in:
            - {arg_name: src}
            - {arg_name: src}   # <-
        """, "bad.tensors_in[1].arg_name", "name 'src' is used twice in this op"),
    Case("duplicate-input-and-param", """\
        bad:
          arch: none
          tensors_in:
            - {arg_name: src}
          params:
            - arg_name: a
              type: bool
            - arg_name: src   # <-
              type: bool
        """, "bad.params[1].arg_name", "name 'src' is used twice in this op"),
    Case("duplicate-output-and-param", """\
        bad:
          arch: none
          params:
            - {arg_name: dst, type: bool}
          tensors_out:
            - {arg_name: dst, dtype: TL_FLOAT, shape: "(1,)"}   # <-
        """, "bad.tensors_out[0].arg_name", "name 'dst' is used twice in this op"),
    Case("duplicate-in-child", """\
        bad:
          arch: none
          params:
            - {arg_name: a, type: bool}
        bad_cpu:
          inherits: bad
          arch: cpu
          params:
            - {arg_name: b, type: bool}
            - {arg_name: b, type: string}   # <-
        """, "bad_cpu.params[2].arg_name", "name 'b' is used twice in this op"),
    Case("sametype-missing-input", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: a
              sametype: b   # <-
        """, "bad.tensors_in[0].sametype", "'b' is not another input of this op"),
    Case("sameshape-itself", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: a
              sameshape: a   # <-
        """, "bad.tensors_in[0].sameshape", "'a' is not another input of this op"),
    Case("owner-missing-input", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          tensors_out:
            - arg_name: dst
              dtype: src.dtype
              shape: src.shape
              owner: srcc   # <-
        """, "bad.tensors_out[0].owner", "'srcc' is not an input of this op"),
    Case("view-without-owner", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          tensors_out:
            - arg_name: dst
              dtype: src.dtype
              shape: src.shape
              view: "src[1:]"   # <-
        """, "bad.tensors_out[0].view", "a view needs an 'owner' input"),
    Case("input-made-by-a-reader", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          tensors_out:
            - arg_name: dst
              dtype: src.dtype
              shape: src.shape
              input: true   # <-
        """, "bad.tensors_out[0].input",
         "a model input is made by an op that reads nothing; this op reads src"),
    # Python expressions and code ------------------------------------------------------
    Case("invalid-expression", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          tensors_out:
            - arg_name: dst
              dtype: src.dtype
              shape: "src.shape[:"   # <-
        """, "bad.tensors_out[0].shape", "invalid Python expression"),
    Case("statement-as-expression", """\
        bad:
          arch: none
          params:
            - arg_name: a
              type: int
              checks:
                - expr: "a = 1"   # <-
        """, "bad.params[0].checks[0].expr", "invalid Python expression"),
    Case("invalid-code-line", """\
        bad:
          arch: cpu
          tensors_in: [{arg_name: src}]
          run: |
            x = 1
            y = (x +   # <-
        """, "bad.run", "invalid Python code"),
    Case("invalid-code-inline", """\
        bad:
          arch: cpu
          run: "if"   # <-
        """, "bad.run", "invalid Python code"),
    Case("undefined-name-shape", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          tensors_out:
            - arg_name: dst
              dtype: src.dtype
              shape: srcc.shape   # <-
        """, "bad.tensors_out[0].shape", "unknown name 'srcc'"),
    Case("undefined-name-dtype", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          tensors_out:
            - arg_name: dst
              dtype: srcc.dtype   # <-
              shape: src.shape
        """, "bad.tensors_out[0].dtype", "unknown name 'srcc'"),
    Case("undefined-name-run", """\
        bad:
          arch: cpu
          tensors_in: [{arg_name: src}]
          run: |   # <-
            kernels.copy(src, dstt)
        """, "bad.run", "unknown name 'dstt'"),
    Case("undefined-name-tensor-len", """\
        bad:
          arch: none
          tensors_in:
            - arg_name: src
              len: n * 2   # <-
        """, "bad.tensors_in[0].len", "unknown name 'n'"),
    Case("check-reads-later-param", """\
        bad:
          arch: none
          params:
            - arg_name: a
              type: int
              checks:
                - expr: a < b   # <-
            - {arg_name: b, type: int}
        """, "bad.params[0].checks[0].expr", "unknown name 'b'"),
    Case("bound-reads-later-param", """\
        bad:
          arch: none
          params:
            - arg_name: a
              type: int
              lt: b   # <-
            - {arg_name: b, type: int}
        """, "bad.params[0].lt", "unknown name 'b'"),
    Case("check-reads-later-builtin-named-param", """\
        bad:
          arch: none
          params:
            - arg_name: low
              type: int
              checks:
                - expr: low <= max   # <-
            - {arg_name: max, type: int}
        """, "bad.params[0].checks[0].expr", "unknown name 'max'"),
    Case("post-run-reads-output", """\
        bad:
          arch: cpu
          tensors_out:
            - {arg_name: dst, dtype: TL_FLOAT, shape: "(1,)"}
          post_run: |   # <-
            priv.clear(); dst.fill(0)
        """, "bad.post_run", "unknown name 'dst'"),
    Case("run-rebinds-output", """\
        bad:
          arch: cpu
          tensors_in: [{arg_name: src}]
          tensors_out: [{arg_name: dst, dtype: src.dtype, shape: src.shape}]
          run: |   # <-
            np.copyto(dst, src)
            dst += 1
        """, "bad.run", "run assigns 'dst', a name it is given"),
    Case("static-run-rebinds-input", """\
        bad:
          arch: cpu
          tensors_in: [{arg_name: src}]
          static_run: src = src * 2   # <-
        """, "bad.static_run", "static_run assigns 'src', a name it is given"),
    Case("run-on-abstract-op", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          run: print(src)   # <-
        """, "bad.run", "an abstract op (arch none) has no run code"),
    Case("static-run-on-abstract-op", """\
        bad:
          arch: none
          static_run: |   # <-
            priv["x"] = 1
        """, "bad.static_run", "an abstract op (arch none) has no run code"),
    # Examples --------------------------------------------------------------------------
    Case("example-unknown-input", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          examples:
            - inputs: {srcc: [1]}   # <-
              error: x
        """, "bad.examples[0].inputs", "'srcc' is not one of src"),
    Case("example-unknown-param", """\
        bad:
          arch: none
          params: [{arg_name: a, type: bool}]
          examples:
            - error: x
              params: {b: true}   # <-
        """, "bad.examples[0].params", "'b' is not one of a"),
    Case("example-outputs-and-error", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          tensors_out: [{arg_name: dst, dtype: src.dtype, shape: src.shape}]
          examples:
            - inputs: {src: [1]}
              error: x
            - inputs: {src: [1]}   # <-
              outputs: {dst: [1]}
              error: y
        """, "bad.examples[1]", "either 'outputs' or 'error'"),
    Case("example-neither", """\
        bad:
          arch: none
          tensors_in: [{arg_name: src}]
          examples:
            - inputs: {src: [1]}   # <-
        """, "bad.examples[0]", "either 'outputs' or 'error'"),
    # Inheritance and files ----------------------------------------------------------
    Case("inherits-unknown", """\
        bad:
          arch: none
        bad_cpu:
          arch: cpu
          inherits: badd   # <-
        """, "bad_cpu.inherits", "'badd' is not an op described in this file"),
    Case("inherits-other-file", """\
        bad_cpu:
          arch: cpu
          inherits: scale   # <-
        """, "bad_cpu.inherits", "'scale' is not an op described in this file"),
    Case("inherits-cycle", """\
        bad_a:
          inherits: bad_b
          arch: none
        bad_b:
          inherits: bad_a   # <-
          arch: cpu
        """, "bad_b.inherits", "inheritance cycle: bad_a -> bad_b -> bad_a"),
    Case("inherits-itself", """\
        bad:
          arch: none
          inherits: bad   # <-
        """, "bad.inherits", "inheritance cycle: bad -> bad"),
    Case("optype-in-two-files", """\
        zzz:
          arch: none
        shift:   # <-
          arch: none
        """, "shift", "optype also described in descriptions/ops/shift.yaml",
         file="descriptions/ops/zdup.yaml"),
    # Optimizer files -----------------------------------------------------------------
    Case("optimizer-unknown-optype", """\
        arch: cpu
        expanders:
          scale:
            - replace: scale_cpu
          nope:   # <-
            - replace: scale_cpu
        """, "expanders.nope", "'nope' is not an abstract op (arch none)",
         file="descriptions/optimizers/cpu.yaml"),
    Case("optimizer-runnable-optype", """\
        arch: cpu
        expanders:
          shift_cpu:   # <-
            - replace: shift_cpu
        """, "expanders.shift_cpu", "'shift_cpu' is not an abstract op (arch none)",
         file="descriptions/optimizers/cpu.yaml"),
    Case("optimizer-replace-other-arch", """\
        arch: cpu
        expanders:
          scale:
            - when: op.params.alpha > 1
              replace: scale_cpu
            - replace: shift   # <-
        """, "expanders.scale[1].replace", "'shift' is not an op of arch 'cpu'",
         file="descriptions/optimizers/cpu.yaml"),
    Case("optimizer-replace-unknown", """\
        arch: cpu
        expanders:
          scale:
            - replace: scale_gpu   # <-
        """, "expanders.scale[0].replace", "'scale_gpu' is not an op of arch 'cpu'",
         file="descriptions/optimizers/cpu.yaml"),
    Case("optimizer-rule-without-when-not-last", """\
        arch: cpu
        expanders:
          scale:
            - replace: scale_cpu   # <-
            - when: op.params.alpha > 1
              replace: scale_cpu
        """, "expanders.scale[0].when", "only the last rule may omit 'when'",
         file="descriptions/optimizers/cpu.yaml"),
    Case("optimizer-when-undefined-name", """\
        arch: cpu
        expanders:
          scale:
            - when: target.params.alpha > 1   # <-
              replace: scale_cpu
            - replace: scale_cpu
        """, "expanders.scale[0].when", "unknown name 'target'",
         file="descriptions/optimizers/cpu.yaml"),
    Case("optimizer-empty-rules", """\
        arch: cpu
        expanders:
          scale: []   # <-
        """, "expanders.scale", "expected a non-empty list of rules",
         file="descriptions/optimizers/cpu.yaml"),
    Case("optimizer-unknown-key", """\
        arch: cpu
        expander: {}   # <-
        """, "expander", "unknown key 'expander'",
         file="descriptions/optimizers/cpu.yaml"),
    Case("optimizer-arch-file-mismatch", """\
        arch: cpu   # <-
        expanders: {}
        """, "arch", "the file of arch 'cpu' must be named cpu.yaml",
         file="descriptions/optimizers/gpu.yaml"),
    Case("optimizer-arch-none", """\
        arch: none   # <-
        """, "arch", "expected an arch of descriptions/archs (cpu, dnnl), found 'none'",
         file="descriptions/optimizers/none.yaml"),
    # Architectures (descriptions/archs) ---------------------------------------------------
    Case("arch-file-mismatch", """\
        arch: cpu   # <-
        mtype: cpu
        dtypes: any
        """, "arch", "the file of arch 'cpu' must be named cpu.yaml",
         file="descriptions/archs/gpu.yaml"),
    Case("arch-none", """\
        arch: none   # <-
        """, "arch", "an arch name is an identifier other than 'none' (abstract ops), found "
                     "'none'", file="descriptions/archs/none.yaml"),
    Case("arch-mtype", """\
        arch: gpu
        mtype: gpu   # <-
        """, "mtype", "expected a memory type (cpu), found 'gpu'",
         file="descriptions/archs/gpu.yaml"),
    Case("arch-missing-dtypes", """\
        arch: gpu   # <-
        mtype: cpu
        """, None, "'dtypes' is required", file="descriptions/archs/gpu.yaml"),
    Case("arch-unknown-dtype", """\
        arch: gpu
        mtype: cpu
        dtypes: [TL_HALF]   # <-
        """, "dtypes", "unknown dtype 'TL_HALF'", file="descriptions/archs/gpu.yaml"),
    Case("arch-no-dtypes", """\
        arch: gpu
        mtype: cpu
        dtypes: []   # <-
        """, "dtypes", "expected the dtypes its ops compute in, found none",
         file="descriptions/archs/gpu.yaml"),
    Case("arch-fallback-unknown", """\
        arch: gpu
        mtype: cpu
        dtypes: float
        fallback: tpu   # <-
        """, "fallback", "expected another arch of descriptions/archs (cpu, dnnl), found 'tpu'",
         file="descriptions/archs/gpu.yaml"),
    Case("arch-fallback-cycle", """\
        arch: cpu
        mtype: cpu
        dtypes: any
        fallback: dnnl   # <-
        """, "fallback", "fallback cycle: cpu -> dnnl -> cpu", file="descriptions/archs/cpu.yaml"),
    Case("arch-op-list", """\
        arch: gpu
        mtype: cpu
        dtypes: float
        float32_ops: [1]   # <-
        """, "float32_ops", "expected a list of ops of arch 'gpu', found [1]",
         file="descriptions/archs/gpu.yaml"),
    Case("arch-package", """\
        arch: gpu
        mtype: cpu
        dtypes: float
        package: my-gpu.arch   # <-
        """, "package", "expected a dotted module name (the module defining ARCH), "
                        "found 'my-gpu.arch'", file="descriptions/archs/gpu.yaml"),
    Case("arch-unknown-key", """\
        arch: gpu
        mtype: cpu
        dtypes: float
        colour: red   # <-
        """, "colour", "unknown key 'colour'", file="descriptions/archs/gpu.yaml"),
    Case("arch-template-name", """\
        arch: gpu
        mtype: cpu
        dtypes: float
        templates:
          bad-name: {run: pass}   # <-
        """, "templates.bad-name", "a template name is an identifier, found 'bad-name'",
         file="descriptions/archs/gpu.yaml"),
    Case("arch-template-key", """\
        arch: gpu
        mtype: cpu
        dtypes: float
        templates:
          t:
            run: pass
            when: x   # <-
        """, "templates.t.when", "unknown key 'when'", file="descriptions/archs/gpu.yaml"),
    Case("arch-template-code", """\
        arch: gpu
        mtype: cpu
        dtypes: float
        templates:
          t:
            run: x = (   # <-
        """, "templates.t.run", "invalid Python code", file="descriptions/archs/gpu.yaml"),
    Case("arch-template-empty", """\
        arch: gpu
        mtype: cpu
        dtypes: float
        templates:
          t: {}   # <-
        """, "templates.t", "expected a mapping of doc, scratch, static_run, run, post_run",
         file="descriptions/archs/gpu.yaml"),
    Case("op-template-unknown", """\
        bad:
          arch: cpu
          template: nope   # <-
        """, "bad.template", "'nope' is not a template of arch 'cpu' (known: none)"),
    # Param groups (descriptions/params.yaml) ----------------------------------------------
    Case("op-group-unknown", """\
        bad:
          arch: none
          param_groups: [window3d]   # <-
        """, "bad.param_groups", "'window3d' is not a group of descriptions/params.yaml "
                                 "(known: window2d, dilated_window2d, conv_window2d, "
                                 "conv_window3d, pool_window2d, pool_window3d, "
                                 "activation, activation_dnnl, recurrent)"),
    Case("op-group-twice", """\
        bad:
          arch: none
          param_groups: [window2d, dilated_window2d]   # <-
        """, "bad.param_groups", "param 'size' is in two of its groups"),
    Case("op-group-change", """\
        bad:
          arch: none
          param_groups: [window2d]
          params:
            size: {type: "int[3]"}   # <-
        """, "bad.params.size.type", "'size' is a param group's: an op adds checks to it, "
                                     "and cannot change its 'type'"),
    Case("op-group-name-taken", """\
        bad:
          arch: none
          tensors_in:
            size: {}
          param_groups: [window2d]   # <-
        """, "bad.params.size.arg_name", "name 'size' is used twice in this op"),
    Case("group-not-mapping", """\
        [window]   # <-
        """, None, "expected a mapping of group name to group, found a list",
         file="descriptions/params.yaml"),
    Case("group-name", """\
        bad-group:   # <-
          params: {x: {type: int}}
        """, "bad-group", "a group name must be an identifier", file="descriptions/params.yaml"),
    Case("group-extends-unknown", """\
        a:
          extends: b   # <-
          params: {x: {type: int}}
        """, "a.extends", "'b' is not a group described before it (known: none)",
         file="descriptions/params.yaml"),
    Case("group-no-params", """\
        a:
          params: {}   # <-
        """, "a.params", "expected a mapping of param name to param, found none",
         file="descriptions/params.yaml"),
    Case("group-param", """\
        a:
          params:
            x: {type: int, ge: y}   # <-
        """, "a.params.x.ge", "unknown name 'y'", file="descriptions/params.yaml"),
    Case("group-check-reads-an-op", """\
        a:
          params:
            x:
              type: int
              checks: [{expr: x < src.ndim}]   # <-
        """, "a.params.x.checks[0].expr", "unknown name 'src'", file="descriptions/params.yaml"),
    Case("group-check-reads-undeclared", """\
        a:
          reads: [src]
          params: {x: {type: int}}
          checks:
            - {expr: x < weight.ndim}   # <-
        """, "a.checks[0].expr", "unknown name 'weight' (known here: src, x,",
         file="descriptions/params.yaml"),
    Case("group-check-arg-unread", """\
        a:
          reads: [src]
          params: {x: {type: int}}
          checks:
            - {expr: x < src.ndim, arg: weight}   # <-
        """, "a.checks[0].arg", "'weight' is neither an input the group reads (reads: src) nor its param",
         file="descriptions/params.yaml"),
    Case("group-reads-a-param", """\
        a:
          reads: [x]   # <-
          params: {x: {type: int}}
        """, "a.reads", "'x' is named twice (an input it reads, or a param)",
         file="descriptions/params.yaml"),
    Case("op-group-checks-in-a-variant", """\
        bad:
          arch: none
          tensors_in:
            src: {}
            weight: {}
        bad_cpu:
          inherits: bad
          arch: cpu
          param_groups: [conv_window2d]   # <-
        """, "bad_cpu.param_groups", "group 'conv_window2d' checks the op: a variant takes it "
                                     "from its parent, never itself"),
    Case("op-group-reads-missing-input", """\
        bad:
          arch: none
          tensors_in:
            src: {}
          param_groups: [conv_window2d]   # <-
        """, "bad.param_groups", "group 'conv_window2d' reads input 'weight', which this op "
                                 "does not take"),
]


def _marked_line(text: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), 1) if "# <-" in line]
    assert len(lines) == 1, "a case marks exactly one line"
    return lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_schema_error(tree, case):
    before = snapshot(tree)
    for rel, text in case.files.items():
        (tree / rel).write_text(text, encoding="utf-8")
    result = run(tree)
    assert result.rc == 1
    assert result.out == ""
    match = ERROR.fullmatch(result.err)
    assert match, f"not one `file:line: path: message` line: {result.err!r}"
    assert match["file"] == case.file
    assert int(match["line"]) == _marked_line(case.files[case.file]), result.err
    assert match["path"] == case.path, result.err
    assert case.message in match["msg"], result.err
    # Nothing written: every file byte for byte and mtime as before, none added.
    assert snapshot(tree) == before


def test_schema_error_with_check_writes_nothing_either(tree):
    before = snapshot(tree)
    write_descriptions(tree, {"bad.yaml": "bad:\n  arch: gpu\n"})
    result = run(tree, "--check")
    assert result.rc == 1
    assert result.err == "error: descriptions/ops/bad.yaml:2: bad.arch: unknown arch 'gpu' " \
                         "(known: none, cpu, dnnl)\n"
    assert snapshot(tree) == before


def test_error_in_a_check_a_variant_adds_points_at_the_variant_line(tree):
    write_descriptions(tree, {"bad.yaml": """\
        bad:
          arch: none
          tensors_in:
            src: {}
          tensors_out:
            dst: {dtype: src.dtype, shape: src.shape}
        bad_cpu:
          inherits: bad
          arch: cpu
          tensors_out:
            dst: {checks: [{expr: srcc.shape == dst.shape}]}
        """})
    result = run(tree)
    assert result.rc == 1
    assert result.err.startswith(
        "error: descriptions/ops/bad.yaml:11: bad_cpu.tensors_out.dst.checks[0].expr: "
        "unknown name 'srcc'")


def test_empty_description_file(tree):
    before = snapshot(tree)
    (tree / "descriptions/ops/bad.yaml").write_text("", encoding="utf-8")
    result = run(tree)
    assert (result.rc, result.err) == (
        1, "error: descriptions/ops/bad.yaml:1: expected a mapping of optype to description\n")
    assert snapshot(tree) == before
