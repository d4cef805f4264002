"""Text models: small BERT and GPT-2 encoders as transformers exports them (int64 token
ids and masks, embeddings gathered, position ids from a Range, dynamic batch and
sequence axes), run through one Session at several sequence lengths against ONNX
Runtime."""

from __future__ import annotations

import numpy as np
import pytest

from lightnet import Session
from lightnet.errors import LightNetError
from tests.frontends import textmodels
from tests.frontends.onnxutil import run_ort
from tests.helpers import rel_error

pytest.importorskip("onnx")
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def bert_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bert") / "bert.onnx"
    path.write_bytes(textmodels.encoder().SerializeToString())
    return path


def test_what_follows_the_sequence_is_computed_not_folded(bert_file):
    """The position ids (a Range to the sequence length) and the token types (a slice of
    a [1, 512] buffer to it) change size with the sequence: ops whose params follow it,
    not weights of one size (the importer folds the rest of the shape arithmetic)."""
    from lightnet.frontends.onnx import convert

    ir, _ = convert(bert_file)
    params = {op["optype"]: {p["arg_name"]: p["value"] for p in op["params"]}
              for op in ir["ops"] if op["optype"] in ("arange", "slice")}
    assert params["arange"] == {"dtype": "TL_INT32", "start": 0, "stop": "sequence", "step": 1}
    assert params["slice"] == {"axis": 1, "start": 0, "len": "sequence"}


@pytest.mark.parametrize("target", ["dnnl", "cpu"])
def test_bert_any_sequence_one_session(bert_file, target):
    from onnx import load

    model = load(str(bert_file))
    session = Session(bert_file, target=target)
    assert [(i.name, i.dtype, i.shape) for i in session.inputs] == [
        ("input_ids", np.int64, ("batch", "sequence")),
        ("attention_mask", np.int64, ("batch", "sequence"))]
    runs = [(2, 16), (1, 128), (3, 384), (2, 16)]
    for batch, sequence in runs:
        feeds = textmodels.feeds(batch, sequence, seed=sequence)
        want = run_ort(model, feeds)["last_hidden_state"]
        got = session.run(feeds)["last_hidden_state"]
        assert got.shape == (batch, sequence, textmodels.HIDDEN)
        assert rel_error(got, want) <= TOLERANCE, (batch, sequence)
    # One plan per shape met, each compiled once: the last run took the first plan.
    assert session.planned == [{"batch": 1, "sequence": 128}, {"batch": 3, "sequence": 384},
                               {"batch": 2, "sequence": 16}]


def test_gpt2_causal_mask(tmp_path):
    model = textmodels.encoder(causal=True, seed=1)
    path = tmp_path / "gpt2.onnx"
    path.write_bytes(model.SerializeToString())
    session = Session(path, target="dnnl")
    for batch, sequence in [(1, 16), (2, 128)]:
        feeds = textmodels.feeds(batch, sequence, seed=batch)
        want = run_ort(model, feeds)["last_hidden_state"]
        assert rel_error(session.run(feeds)["last_hidden_state"], want) <= TOLERANCE
    # The causal mask matters: the first position does not see the others.
    feeds = textmodels.feeds(1, 16)
    first = session.run(feeds)["last_hidden_state"][0, 0]
    feeds["input_ids"][0, 1:] = (feeds["input_ids"][0, 1:] + 1) % textmodels.VOCAB
    np.testing.assert_allclose(session.run(feeds)["last_hidden_state"][0, 0], first, atol=1e-6)


def test_token_ids_checked(bert_file):
    session = Session(bert_file, target="cpu")
    feeds = textmodels.feeds(1, 8)
    feeds["input_ids"][0, 2] = 2**40
    with pytest.raises(LightNetError, match=r"input 'input_ids': int64 value 1099511627776 does "
                                            r"not fit in the model's int32 tensor"):
        session.run(feeds)
    feeds["input_ids"][0, 2] = textmodels.VOCAB
    with pytest.raises(LightNetError, match=rf"src_index holds {textmodels.VOCAB}: expected a "
                                            rf"chunk number in \[-{textmodels.VOCAB}, "
                                            rf"{textmodels.VOCAB - 1}\]"):
        session.run(feeds)
