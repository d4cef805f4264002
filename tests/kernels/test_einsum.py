"""einsum_plan and einsum against numpy.einsum, and the equations it refuses."""

import numpy as np
import pytest

from lightnet.archs.cpu.kernels import carve, scratch_bytes
from lightnet.archs.cpu.kernels.einsum import einsum, einsum_plan, einsum_shape

CASES = [
    ("bhqd,bhkd->bhqk", (2, 3, 5, 4), (2, 3, 6, 4)),  # attention scores: B given transposed
    ("bhqk,bhkd->bhqd", (2, 3, 5, 6), (2, 3, 6, 4)),  # attention-weighted values
    ("bqhd,bkhd->bhqk", (2, 5, 3, 4), (2, 6, 3, 4)),  # heads not yet moved: both copied
    ("ij,jk->ik", (3, 4), (4, 5)),
    ("ij,kj->ik", (3, 4), (5, 4)),
    ("ji,jk->ik", (4, 3), (4, 5)),
    ("ij,jk->ki", (3, 4), (4, 5)),  # the product transposed: operands swapped
    ("bij,bjk->bki", (2, 3, 4), (2, 4, 5)),
    ("...ij,...jk->...ik", (2, 1, 3, 4), (5, 4, 6)),  # broadcast batch
    ("...ij,jk", (2, 3, 4), (4, 5)),  # implicit output
    ("i,j->ij", (3,), (4,)),
    ("i,i->", (3,), (3,)),
    ("bnd,de->bne", (2, 3, 4), (4, 5)),
    ("bhwc,hkc->bhwk", (2, 3, 4, 5), (3, 6, 5)),  # relative position logits (MaxViT)
    ("nchw,kc->nkhw", (2, 3, 4, 5), (6, 3)),  # output needs a transpose
    ("ab,ab->ab", (2, 3), (1, 3)),  # all batch, broadcast
    ("ij->ji", (3, 4), None),
    ("abc->cab", (2, 3, 4), None),
    ("abc->abc", (2, 3, 4), None),
]


@pytest.mark.parametrize("equation, shape1, shape2", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_einsum_matches_numpy(equation, shape1, shape2, dtype):
    rng = np.random.default_rng(len(equation))
    a = rng.standard_normal(shape1).astype(dtype)
    b = None if shape2 is None else rng.standard_normal(shape2).astype(dtype)
    plan = einsum_plan(equation, *[s for s in (shape1, shape2) if s is not None])
    dst = np.full(einsum_shape(plan), np.nan, dtype)
    layout = plan.scratch(dtype)
    buffer = np.full(scratch_bytes(layout), 0xFF, np.uint8)  # garbage scratch
    assert einsum(a, b, dst, plan=plan, ws=carve(buffer, layout)) is None
    want = np.einsum(equation, *[x for x in (a, b) if x is not None], dtype=np.float64)
    np.testing.assert_allclose(dst, want.reshape(dst.shape), rtol=1e-5, atol=1e-5)


def test_plans_avoid_copies_where_the_layout_allows():
    scores = einsum_plan("bhqd,bhkd->bhqk", (1, 6, 197, 64), (1, 6, 197, 64))
    assert scores.scratch(np.float32) == () and scores.second.swap
    context = einsum_plan("bhqk,bhkd->bhqd", (1, 6, 197, 197), (1, 6, 197, 64))
    assert context.scratch(np.float32) == ()
    swapped = einsum_plan("ij,jk->ki", (3, 4), (4, 5))
    assert swapped.swapped and swapped.scratch(np.float32) == ()
    moved = einsum_plan("bqhd,bkhd->bhqk", (1, 5, 3, 4), (1, 6, 3, 4))
    assert [name for name, _, _ in moved.scratch(np.float32)] == ["a", "b"]


@pytest.mark.parametrize("equation, shapes, message", [
    ("ii->i", [(3, 3)], "index 'i' appears twice in an operand (a diagonal"),
    ("ij,jk,kl->il", [(2, 2)] * 3, "einsum of 3 operands: only one or two"),
    ("ij,jk->i", [(2, 3), (3, 4)], "index 'k' is summed in one operand only"),
    ("ij->i", [(2, 3)], "one operand summed over 'j' (only a transpose"),
    ("ij,jk->ik", [(2, 3), (4, 5)], "index 'j' has size 3 in one operand and 4 in the other"),
    ("ij,ij->ij", [(2, 3), (3, 3)], "index 'i' has sizes 2 and 3, which do not broadcast"),
    ("ik,kj->iz", [(2, 3), (3, 4)], "output index 'z' is in no operand"),
    ("ij,jk->ii", [(2, 3), (3, 2)], "index 'i' appears twice in the output"),
    ("i$,j->ij", [(2, 2), (2,)], "indices are letters, with at most one '...'"),
    ("...i,...i->i", [(2, 3), (2, 3)], "the output drops the '...' dimensions"),
    ("ijk,jk->ik", [(2, 3), (3, 4)], "'ijk' names 3 dimensions but its operand has 2"),
    ("ij,jk->ik", [(2, 3)], "has 2 operand(s), but 1 are given"),
])
def test_refused_equations_say_why(equation, shapes, message):
    with pytest.raises(ValueError) as info:
        einsum_plan(equation, *shapes)
    assert message in str(info.value)


@pytest.mark.parametrize("equation, shapes, macs", [
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)], 2 * 3 * 5 * 6 * 4),
    ("ij,jk->ki", [(3, 4), (4, 5)], 3 * 4 * 5),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)], 2 * 5 * 3 * 6 * 4),
    ("ij->ji", [(3, 4)], 0),
])
def test_macs_count_the_products(equation, shapes, macs):
    assert einsum_plan(equation, *shapes).macs == macs
