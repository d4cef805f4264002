"""Mutation fuzzing of real ONNX files (onnx_mutation.py): every mutated model runs
or is refused with one clear line, no internal error, no hang, no memory past the
limit.

The default suite runs a fixed slice of the cases (the corpus of files only: the
node test cases take half a minute to generate); `-m slow` runs 10,000 cases over
the whole corpus. A finding names its case, which `python
tests/fuzz/onnx_mutation.py --case N [--node]` runs again; each one fixed has a
regression test of its own (tests/frontends/test_onnx_hostile.py).
"""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from onnx_mutation import describe, fuzz  # noqa: E402

CI_CASES = 100
SLOW_CASES = 10_000


def check(indices, node: bool) -> None:
    counts, findings = fuzz(indices, node)
    assert not findings, f"{len(findings)} findings of {sum(counts.values())} cases " \
        f"{counts}:\n" + "\n".join(describe(c, r)[:600] for c, r in findings[:20])
    # Both ways out are exercised.
    assert counts.get("ran", 0) and counts.get("refused", 0), counts


def test_mutated_onnx_files_run_or_are_refused_in_one_line():
    check(range(CI_CASES), node=False)


@pytest.mark.slow
def test_ten_thousand_mutated_onnx_models():
    check(range(SLOW_CASES), node=True)
