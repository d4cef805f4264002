"""Loading every description of a tree, validated, into the description model.

Every mistake an author can make is reported while loading, with its file
and line (generator.source.DescriptionError); rendering never re-derives what
the model decided. The types are in generator.schema; the format is
specified in docs/op-description.md, docs/optimizer-description.md and
docs/arch-description.md. The archs and param groups load first (ops name
them), the archs' op lists once the ops are loaded, the optimizers last.
"""

from __future__ import annotations

from pathlib import Path

from generator.archs import check_op_lists, load_archs
from generator.fields import Fields
from generator.groups import load_groups
from generator.ops import DTYPE_SETS, load_family
from generator.optimizers import derived_expanders, load_optimizer
from generator.schema import DTYPES, Descriptions, OpDesc, Optimizer
from generator.source import load_yaml


def load_types(path: Path, label: str) -> dict[str, tuple[str, ...]]:
    """The named dtype sets of descriptions/types.yaml."""
    if not path.exists():
        return {}
    doc = load_yaml(path, label)
    f = Fields(doc, label, "", 1)
    g = Fields(f.get("dtypes", dict), label, "dtypes", f.where("dtypes")[1])
    sets = {}
    for name in g.map:
        if not name.isidentifier() or name in DTYPES:
            raise g.error(name, f"a dtype set name is an identifier other than a dtype, found '{name}'")
        members = g.get(name, list)
        if not members or any(d not in DTYPES for d in members) or len(set(members)) < len(members):
            raise g.error(name, f"expected a list of distinct dtypes ({', '.join(DTYPES)})")
        sets[name] = tuple(members)
    g.done()
    f.done()
    return sets


def load(root: Path) -> Descriptions:
    """Every description under `root`/descriptions, validated."""
    sets = load_types(root / "descriptions" / "types.yaml", "descriptions/types.yaml")
    token = DTYPE_SETS.set(sets)
    try:
        return _load(root, sets)
    finally:
        DTYPE_SETS.reset(token)


def _load(root: Path, sets) -> Descriptions:
    archs, arch_docs = load_archs(root, sets)
    groups = load_groups(root / "descriptions" / "params.yaml", "descriptions/params.yaml")
    families = []
    ops: dict[str, tuple[OpDesc, str]] = {}
    for path in sorted((root / "descriptions" / "ops").glob("*.yaml")):
        label = path.relative_to(root).as_posix()
        family = load_family(path, label, {optype: file for optype, (_, file) in ops.items()},
                             archs, groups)
        for op in family.ops:
            ops[op.optype] = (op, label)
        families.append(family)
    by_optype = {optype: op for optype, (op, _) in ops.items()}
    for name, arch in archs.items():
        check_op_lists(*arch_docs[name], arch, by_optype)
    optimizers = {}
    for path in sorted((root / "descriptions" / "optimizers").glob("*.yaml")):
        optimizer = load_optimizer(path, path.relative_to(root).as_posix(), by_optype, archs)
        optimizers[optimizer.arch.name] = optimizer
    runnable = sorted({op.arch for op in by_optype.values() if op.runnable})
    for name in runnable:  # an arch without rules of its own may still need guards
        derived = derived_expanders(archs[name], by_optype)
        if name not in optimizers and derived:
            optimizers[name] = Optimizer(archs[name], "", archs[name].source, derived, ())
    return Descriptions(
        sets,
        tuple(groups.values()),
        tuple(archs.values()),
        tuple(families),
        tuple(optimizers[arch] for arch in runnable if arch in optimizers),
    )
