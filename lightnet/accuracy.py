"""How close a model computing in reduced precision (int8 from `lightnet quantize`, bf16
from `--precision bf16`) comes to its float32 self, on the same samples: one contract
for both.

Per output:
- the max relative error: max |got - want| / (max want - min want), over every sample,
  relative to the range the float32 output spans (its largest magnitude when that
  range is 0); the contract is CONTRACT (2e-2);
- for a classifier's scores (an output whose elements lie along its last axis, of at
  least 2): top-1 agreement, counted only on the samples whose float32 best two
  scores are more than NEAR_TIE (2e-2) of that sample's score range apart. Closer
  than that, the order of the two is below the precision asked for: those near-ties
  are reported apart and not counted. The contract is every counted sample agreeing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CONTRACT", "NEAR_TIE", "OutputAccuracy", "Report", "compare", "max_rel_error",
           "top1"]

CONTRACT = 2e-2
NEAR_TIE = 2e-2


def max_rel_error(got, want) -> float:
    """max |got - want| relative to the range of `want` (its largest magnitude when the
    range is 0; 0 for two zero arrays), in float64; inf where either is not finite."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if not (np.all(np.isfinite(got)) and np.all(np.isfinite(want))):
        return float("inf")
    diff = float(np.max(np.abs(got - want), initial=0.0))
    scale = float(np.max(want, initial=0.0) - np.min(want, initial=0.0)) if want.size else 0.0
    if scale == 0.0:
        scale = float(np.max(np.abs(want), initial=0.0))
    if diff == 0.0:
        return 0.0
    return diff / scale if scale > 0.0 else float("inf")


def is_scores(shape) -> bool:
    """Whether an output of `shape` (one sample's) is a classifier's scores: all its
    elements along its last axis, of at least 2."""
    return len(shape) >= 1 and shape[-1] >= 2 and int(np.prod(shape)) == shape[-1]


def top1(got, want, near_tie: float = NEAR_TIE) -> tuple[int, int, int]:
    """(samples whose best class agrees, samples counted, near-ties left out) of
    scores `got` against `want`, [samples, classes]: a sample is a near-tie when the
    best two of `want` are at most `near_tie` of its score range apart."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    best_two = np.sort(want, axis=1)[:, -2:]
    spread = want.max(axis=1) - want.min(axis=1)
    clear = best_two[:, 1] - best_two[:, 0] > near_tie * spread
    agree = np.argmax(got, axis=1) == np.argmax(want, axis=1)
    return int(np.sum(agree & clear)), int(np.sum(clear)), int(np.sum(~clear))


@dataclass(frozen=True)
class OutputAccuracy:
    name: str
    max_rel_error: float
    top1: tuple[int, int, int] | None  # (agreeing, counted, near-ties); None: not scores

    def within(self, contract: float = CONTRACT) -> bool:
        agree = self.top1 is None or self.top1[0] == self.top1[1]
        return self.max_rel_error <= contract and agree

    def line(self) -> str:
        text = f"{self.name}: max relative error {self.max_rel_error:.2e} of its range"
        if self.top1 is not None:
            agree, counted, ties = self.top1
            text += f", top-1 {agree}/{counted} agree ({ties} near-ties not counted)"
        return text


@dataclass(frozen=True)
class Report:
    """The accuracy of every output over `samples` samples."""

    samples: int
    outputs: tuple[OutputAccuracy, ...]

    def within(self, contract: float = CONTRACT) -> bool:
        return all(o.within(contract) for o in self.outputs)

    def lines(self, contract: float = CONTRACT) -> list[str]:
        verdict = "within" if self.within(contract) else "OUTSIDE"
        return ([f"accuracy on {self.samples} samples against float32 ({verdict} the "
                 f"contract: max relative error <= {contract:g} of each output's range, "
                 "top-1 agreeing on every sample that is not a near-tie):"]
                + [f"  {o.line()}" for o in self.outputs])


def compare(got: list[dict], want: list[dict]) -> Report:
    """The accuracy of outputs `got` against the float32 outputs `want`: one dict of
    arrays by output name per sample, in the same order."""
    names = list(want[0]) if want else []
    outputs = []
    for name in names:
        g = np.stack([np.asarray(s[name], dtype=np.float64) for s in got])
        w = np.stack([np.asarray(s[name], dtype=np.float64) for s in want])
        counts = None
        if is_scores(w.shape[1:]):
            counts = top1(g.reshape(len(w), -1), w.reshape(len(w), -1))
        outputs.append(OutputAccuracy(name, max_rel_error(g, w), counts))
    return Report(len(want), tuple(outputs))
