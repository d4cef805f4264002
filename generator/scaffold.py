"""`python -m generator new-op NAME`: a commented description to start from."""

from __future__ import annotations

import keyword
from pathlib import Path

from generator.source import DescriptionError, load_yaml

SKELETON = '''\
# {name}: describe in one sentence what the op computes.
# The format is specified in docs/op-description.md. After editing, run
# `python -m generator` and commit the description with lightnet/auto/.

{name}:
  arch: none  # abstract: what the op computes; compile lowers it to {name}_cpu
  doc: >
    What {name} computes, which dtypes it accepts and any semantics a
    user must know (edge cases, rounding, layout).
  tensors_in:  # dtype: a set of descriptions/types.yaml, a dtype, or a list
    src: {{dtype: float, doc: The input.}}
  tensors_out:  # dtype and shape: expressions over the inputs and params
    dst: {{dtype: src.dtype, shape: src.shape, doc: The result.}}
  params:  # type: int, float, double, bool, string, int[2], float[], [CHOICE, ...]
    alpha: {{type: float, default: 1.0, ge: 0, doc: A scale factor.}}
  examples:  # run as tests; an `error` example names the failing check
    - {{inputs: {{src: [[1, 2], [3, 4]]}}, params: {{alpha: 2}}, outputs: {{dst: [[2, 4], [6, 8]]}}}}
    - {{inputs: {{src: [1]}}, params: {{alpha: -1}}, error: "param 'alpha': ge"}}

# The cpu variant: the parent's checks, plus its run code (a kernel call).
{name}_cpu: {{inherits: {name}, arch: cpu, run: "np.multiply(src, alpha, out=dst)"}}
'''


def new_op(root: Path, name: str) -> Path:
    """Write descriptions/ops/NAME.yaml; ValueError if the name is bad or taken."""
    if not name.isidentifier() or keyword.iskeyword(name) or not name.islower():
        raise ValueError(f"'{name}' is not a valid optype (lower-case Python identifier)")
    path = root / "descriptions" / "ops" / f"{name}.yaml"
    if path.exists():
        raise ValueError(f"{path.relative_to(root)} already exists")
    described = _described(root)
    for optype in (name, f"{name}_cpu"):  # the skeleton describes both
        if optype in described:
            raise ValueError(f"optype '{optype}' is already described in {described[optype]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SKELETON.format(name=name), encoding="utf-8")
    return path


def _described(root: Path) -> dict[str, str]:
    """The optypes of the existing descriptions, with their file (a file that
    does not parse is skipped: `python -m generator` reports it)."""
    described = {}
    for path in sorted((root / "descriptions" / "ops").glob("*.yaml")):
        label = path.relative_to(root).as_posix()
        try:
            doc = load_yaml(path, label)
        except DescriptionError:
            continue
        if isinstance(doc, dict):
            for optype in doc:
                described.setdefault(optype, label)
    return described
