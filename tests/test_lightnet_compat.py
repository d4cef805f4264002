"""Models written for LightNet run unchanged: create's fill rules, LightNet's
weight files, ops named for other architectures, and a SqueezeDet-style
detector in LightNet's IL run end to end (`il2json net | lightnet -f w.wts -`),
checked against a numpy re-implementation of LightNet's definitions."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context, LightNetError, LightNetWarning
from lightnet.files import wts_text
from tests.helpers import lightnet, python
from tests.irbuild import op

ROOT = Path(__file__).resolve().parent.parent


def create(name, dims, dtype="TL_FLOAT", **params):
    """A create op `make_NAME` of tensor NAME."""
    return op(f"make_{name}", "create", outs={"dst": name}, dtype=dtype, dims=dims, **params)


def loaded(ops, weights=None, **ctx_kwargs) -> Context:
    ctx = Context(**ctx_kwargs)
    ctx.init({"ops": ops})
    ctx.compile("cpu", weights=weights)
    ctx.load()
    ctx.run()
    return ctx


# create ---------------------------------------------------------------------------------


def test_create_fill_rules():
    ctx = loaded([
        create("zeros", [2, 3], data=[0]),
        create("prefix", [2, 3], data=[1, 2]),
        create("every", [2, 2], "TL_INT8", data=[1, -2, 3, -4]),
        create("none", [3]),
        create("ranged", [2, 500], data=[9], ran=[-1, 2]),
        create("point", [4], "TL_INT32", data=[1, 2, 3, 4], ran=[7, 7]),
    ])
    np.testing.assert_array_equal(ctx.get_data("zeros"), np.zeros((2, 3)))
    np.testing.assert_array_equal(ctx.get_data("prefix"), [[1, 2, 0], [0, 0, 0]])
    np.testing.assert_array_equal(ctx.get_data("every"), [[1, -2], [3, -4]])
    np.testing.assert_array_equal(ctx.get_data("none"), [0, 0, 0])
    ranged = ctx.get_data("ranged")  # the range wins over data, as in LightNet
    assert ranged.min() >= -1 and ranged.max() <= 2 and ranged.std() > 0.5
    np.testing.assert_array_equal(ctx.get_data("point"), [7, 7, 7, 7])


def test_create_random_values_follow_the_seed():
    ops = [create("a", [50], ran=[0, 1]), create("b", [50], ran=[0, 1])]
    first, again = loaded(ops), loaded(ops, seed=0)
    other = loaded(ops, seed=1)
    np.testing.assert_array_equal(first.get_data("a"), again.get_data("a"))
    assert not np.array_equal(first.get_data("a"), first.get_data("b"))  # per tensor
    assert not np.array_equal(first.get_data("a"), other.get_data("a"))  # per seed


def test_seed_option(tmp_path):
    model = tmp_path / "m.json"
    model.write_text('{"ops": [%s, {"name": "p", "optype": "print", "tensors_in": '
                     '[{"arg_name": "src", "name": "a"}], "tensors_out": [], "params": '
                     '[{"arg_name": "msg", "value": "a:"}]}]}'
                     % str(create("a", [4], ran=[0, 100])).replace("'", '"'))

    def printed(*args):
        out = lightnet(*args, model)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()[1]

    assert printed() == printed("--seed", "0") != printed("--seed", "5")
    bad = lightnet("--seed", "-1", model)
    assert bad.returncode == 2 and "argument --seed: expected a whole number >= 0" in bad.stderr


def test_create_errors():
    with pytest.raises(LightNetError, match=r"data gives at most every element"):
        loaded([create("a", [2], data=[1, 2, 3])])
    with pytest.raises(LightNetError, match=r"tensors \['w'\] are created from a file, but no "
                                            r"weight file \(-f\) gives them"):
        loaded([create("w", [2], from_file=True)], weights={})
    with pytest.raises(LightNetError, match="seed: expected a whole number >= 0, found 1.5"):
        Context(seed=1.5)


# LightNet's weight files ----------------------------------------------------------------


def test_wts_loads_float_and_int8_and_skips_unknown(tmp_path):
    path = tmp_path / "w.wts"
    path.write_text("3\nw 0 4 3f800000 c0000000 3fc00000 0\n"
                    "unused 0 2 3f800000 3f800000\nq 2 3 7f ff 80\n")
    ops = [create("w", [2, 2], from_file=True), create("q", [3], "TL_INT8", from_file=True)]
    with pytest.warns(LightNetWarning, match="ignoring weight 'unused'"):
        ctx = loaded(ops, weights=str(path))
    np.testing.assert_array_equal(ctx.get_data("w"), [[1, -2], [1.5, 0]])
    np.testing.assert_array_equal(ctx.get_data("q"), [127, -1, -128])


@pytest.mark.parametrize("text, message", [
    ("1\nw 0 3 0 0 0\n", "tensor 'w': expected shape (2, 2), found (3,)"),
    ("1\nw 2 4 0 0 0 0\n", "tensor 'w': expected dtype float32, found int8"),
    ("1\nw 0 4 0 0 0 xyz\n", "tensor 'w': values must be hex digits"),
])
def test_wts_errors_name_the_tensor(tmp_path, text, message):
    path = tmp_path / "w.wts"
    path.write_text(text)
    with pytest.raises(LightNetError) as e:
        loaded([create("w", [2, 2], from_file=True)], weights=str(path))
    assert str(e.value) == f"{path}: {message}"


def test_compile_writes_wts_by_suffix(tmp_path):
    """`-c -f w.npz -w out.wts` writes LightNet's format, which `-r -f` reads back."""
    model = tmp_path / "m.json"
    model.write_text('{"ops": [%s, %s, {"name": "s", "optype": "elew", "tensors_in": '
                     '[{"arg_name": "src1", "name": "w"}, {"arg_name": "src2", "name": "q"}], '
                     '"tensors_out": [{"arg_name": "dst", "name": "y"}], "params": '
                     '[{"arg_name": "elew_op", "value": "TL_SUM"}]}]}'
                     % (str(create("w", [3], from_file=True)).replace("'", '"').replace("True", "true"),
                        str(create("q", [3], data=[1, 2, 3])).replace("'", '"')))
    np.savez(tmp_path / "w.npz", w=np.float32([0.5, -1, 2]))
    done = lightnet("-c", "-f", tmp_path / "w.npz", "-o", tmp_path / "c.json",
                    "-w", tmp_path / "out.wts", model, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out.wts").read_text()
    assert text == "1\nw 0 3 3f000000 bf800000 40000000\n"
    ctx = Context()
    ctx.init(str(tmp_path / "c.json"))
    ctx.plan()
    ctx.load(str(tmp_path / "out.wts"))
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("y"), [1.5, 1, 5])


# Ops named for another architecture -------------------------------------------------------


def test_ops_for_other_architectures_run_as_their_abstract_ops():
    ops = [create("a", [3], data=[-1, 0, 2]),
           {"name": "r", "optype": "relu_cuda", "tensors_in": [{"arg_name": "src", "name": "a"}],
            "tensors_out": [{"arg_name": "dst", "name": "b"}], "params": []},
           {"name": "s", "optype": "sigmoid_trt", "tensors_in": [{"arg_name": "src", "name": "b"}],
            "tensors_out": [{"arg_name": "dst", "name": "c"}], "params": []}]
    ops[0]["optype"] = "create_cuda"
    with pytest.warns(LightNetWarning) as record:
        ctx = loaded(ops)
    assert [str(w.message) for w in record] == [
        "<model>: ops for another architecture run as their abstract ops, compiled for the "
        "target: 'make_a' (create_cuda), 'r' (relu_cuda), 's' (sigmoid_trt)"]
    np.testing.assert_allclose(ctx.get_data("c"), 1 / (1 + np.exp(-np.float32([0, 0, 2]))),
                               rtol=1e-6)
    ops[1]["optype"] = "frobnicate_cuda"
    with pytest.raises(LightNetError, match="op 1 \\('r'\\): unknown optype 'frobnicate_cuda'"):
        loaded(ops)


# A SqueezeDet-style detector in LightNet's IL, end to end --------------------------------

A, C, H, W, K = 2, 3, 4, 4, 5  # anchors, classes, output grid, boxes kept
IMG_W, IMG_H = 24, 18

DETECTOR = r"""
#define A 2
#define C 3
#define H 4
#define W 4
#define K 5
#define WEIGHTS(name, co, ci, k)                                                     \
    create(| dst=name##_w | dtype=TL_FLOAT, dims=[co, ci, k, k], data=[0],          \
             ran=[0, 0], from_file=true);                                            \
    create(| dst=name##_b | dtype=TL_FLOAT, dims=[co], data=[0], ran=[0, 0],        \
             from_file=true);
#define CONV(name, in, ci, co, k, s, p)                                              \
    WEIGHTS(name, co, ci, k)                                                         \
    conv2d(src=in, weight=name##_w, bias=name##_b | dst=name |                      \
           group=1, size=[k, k], stride=[s, s], padding=[p, p, p, p],               \
           autopad=NOTSET, dilation=[1, 1]);
#define CONV_RELU(name, in, ci, co, k, s, p)                                         \
    CONV(name, in, ci, co, k, s, p) relu(src=name | dst=name##_relu |);
#define FIRE(n, in, ci, sq, ex)                                                      \
    CONV_RELU(fire##n##_squeeze, in, ci, sq, 1, 1, 0)                                \
    CONV_RELU(fire##n##_expand1, fire##n##_squeeze_relu, sq, ex, 1, 1, 0)           \
    CONV_RELU(fire##n##_expand3, fire##n##_squeeze_relu, sq, ex, 3, 1, 1)           \
    concat(src1=fire##n##_expand1_relu, src2=fire##n##_expand3_relu | dst=fire##n | axis=1);

create(| dst=image | dtype=TL_FLOAT, dims=[1, 3, 16, 16], data=[0], ran=[0, 0],
         from_file=true);
CONV_RELU(conv1, image, 3, 8, 3, 2, 1);
maxpool2d(src=conv1_relu | dst=pool1 | size=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0],
          autopad=NOTSET);
FIRE(2, pool1, 8, 4, 8);
CONV(preds, fire2, 16, ${eval A * (C + 1 + 4)}, 3, 1, 1)

// class probabilities, confidences, and their product: the score of each anchor
slice(src=preds | dst=cls_logits | axis=1, start=0, len=${eval A * C});
transpose(src=cls_logits | dst=cls_t | axes=[0, 2, 3, 1]);
reshape(src=cls_t | dst=cls_2d | dims=[${eval H * W * A}, C]);
softmax(src=cls_2d | dst=probs | axis=1);
maxreduce_arg(src=probs | dst=prob_max, arg=cls_idx | axis=1);
slice(src=preds | dst=conf_logits | axis=1, start=${eval A * C}, len=A);
transpose(src=conf_logits | dst=conf_t | axes=[0, 2, 3, 1]);
reshape(src=conf_t | dst=conf_2d | dims=[${eval H * W * A}, 1]);
sigmoid(src=conf_2d | dst=conf |);
elew(src1=prob_max, src2=conf | dst=score_2d | elew_op=TL_MUL);
reshape(src=score_2d | dst=score | dims=[${eval H * W * A}]);

// boxes from the deltas and the anchors
slice(src=preds | dst=delta_nchw | axis=1, start=${eval A * C + A}, len=${eval A * 4});
transpose(src=delta_nchw | dst=delta_t | axes=[0, 2, 3, 1]);
reshape(src=delta_t | dst=delta | dims=[1, H, W, A, 4]);
create(| dst=anchors | dtype=TL_FLOAT, dims=[1, H, W, A, 4], data=[0], ran=[0, 0],
         from_file=true);
transform_bboxSQD(src_delta=delta, src_anchor=anchors | dst=boxes | width=16, height=16,
                  img_width=${eval 16 * 1.5}, img_height=${eval 360 * 2 ** -2 / 5},
                  x_shift=0, y_shift=0);
reshape(src=boxes | dst=boxes_flat | dims=[${eval H * W * A * 4}]);

// the K best: sort the anchor indices by score, pick their boxes and classes
create(| dst=index | dtype=TL_INT32, dims=[${eval H * W * A}], data=[0], ran=[0, 0],
         from_file=false);
rearange(src=index | dst=index_r | start=0, stop=${eval H * W * A}, step=1);
sort1d_by_key(src_key=score, src_val=index_r | dst_key=score_sorted, dst_val=index_sorted |
              dir=TL_SORT_DIR_DESCENDING);
pick1d(src=boxes_flat, src_index=index_sorted | dst=top_boxes | len=K, stride=4);
reshape(src=cls_idx | dst=cls_idx_flat | dims=[${eval H * W * A}]);
pick1d(src=cls_idx_flat, src_index=index_sorted | dst=top_classes | len=K, stride=1);
slice(src=score_sorted | dst=top_scores | axis=0, start=0, len=K);;
print(src=top_boxes | | msg="top_boxes:");
print(src=top_classes | | msg="top_classes:");
print(src=top_scores | | msg="top_scores:");
"""


def _conv(x, w, b, stride, pad):
    """Convolution as nested loops over output cells (NCHW, OIHW)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[2]
    oh, ow = (x.shape[2] - k) // stride + 1, (x.shape[3] - k) // stride + 1
    out = np.empty((x.shape[0], w.shape[0], oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            out[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w) + b
    return out


def _detector_reference(wt):
    """The detector's outputs from LightNet's definitions, in float64."""
    def conv(name, x, stride, pad):
        return _conv(x, wt[f"{name}_w"], wt[f"{name}_b"], stride, pad)

    relu = lambda x: np.maximum(x, 0)  # noqa: E731
    x = relu(conv("conv1", wt["image"], 2, 1))
    x = x.reshape(1, 8, 4, 2, 4, 2).max(axis=(3, 5))  # 2x2 max pooling, stride 2
    sq = relu(conv("fire2_squeeze", x, 1, 0))
    x = np.concatenate([relu(conv("fire2_expand1", sq, 1, 0)),
                        relu(conv("fire2_expand3", sq, 1, 1))], axis=1)
    preds = conv("preds", x, 1, 1)
    logits = preds[:, :A * C].transpose(0, 2, 3, 1).reshape(H * W * A, C)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    conf = 1 / (1 + np.exp(-preds[:, A * C:A * C + A].transpose(0, 2, 3, 1).reshape(-1)))
    score = probs.max(axis=1) * conf
    classes = probs.argmax(axis=1)
    delta = preds[:, A * C + A:].transpose(0, 2, 3, 1).reshape(-1, 4)
    anchor = wt["anchors"].reshape(-1, 4)
    # tl_tensor_transform_bboxSQD_cuda, element by element
    sx, sy = IMG_W / 16, IMG_H / 16
    boxes = np.empty_like(delta)
    for i, (d, a) in enumerate(zip(delta, anchor)):
        cx = (a[0] + d[0] * a[2]) * sx
        cy = (a[1] + d[1] * a[3]) * sy
        w = a[2] * (np.exp(d[2]) if d[2] < 1 else d[2] * 2.718281828) * sx
        h = a[3] * (np.exp(d[3]) if d[3] < 1 else d[3] * 2.718281828) * sy
        boxes[i] = [min(max(cx - w / 2, 0), IMG_W - 1), min(max(cy - h / 2, 0), IMG_H - 1),
                    max(min(cx + w / 2, IMG_W - 1), 0), max(min(cy + h / 2, IMG_H - 1), 0)]
    order = sorted(range(len(score)), key=lambda i: -score[i])[:K]
    return boxes[order], classes[order], score[order]


def _printed(out: str) -> dict[str, np.ndarray]:
    """The tensors `print` ops wrote: msg -> the numbers under it."""
    arrays, name = {}, None
    for line in out.splitlines():
        if line.startswith("info:"):  # the run is over: summaries of the outputs follow
            break
        if line.endswith(":") and not line.startswith(("[", " ")):
            name = line[:-1]
            arrays[name] = []
        elif name is not None:
            arrays[name] += [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", line)]
    return {k: np.array(v) for k, v in arrays.items()}


@pytest.mark.parametrize("preprocessor", ["pcpp", "cpp"])
def test_squeezedet_style_detector_end_to_end(tmp_path, preprocessor):
    if preprocessor == "cpp" and shutil.which("cpp") is None:
        pytest.skip("no system cpp")
    rng = np.random.default_rng(14)
    shapes = {"image": (1, 3, 16, 16), "conv1_w": (8, 3, 3, 3), "conv1_b": (8,),
              "fire2_squeeze_w": (4, 8, 1, 1), "fire2_squeeze_b": (4,),
              "fire2_expand1_w": (8, 4, 1, 1), "fire2_expand1_b": (8,),
              "fire2_expand3_w": (8, 4, 3, 3), "fire2_expand3_b": (8,),
              "preds_w": (A * (C + 5), 16, 3, 3), "preds_b": (A * (C + 5),)}
    weights = {n: (rng.standard_normal(s) * 0.4).astype(np.float32) for n, s in shapes.items()}
    weights["preds_w"][A * C + A:] *= 0.3  # deltas small enough that most boxes are not clipped
    centers = (np.arange(W) + 0.5) * 16 / W
    anchors = np.zeros((1, H, W, A, 4), np.float32)
    anchors[..., 0] = centers[None, None, :, None]
    anchors[..., 1] = centers[None, :, None, None]
    anchors[..., 2:] = [[[[[3, 5], [6, 4]]]]]
    weights["anchors"] = anchors
    weights["unused_tensor"] = np.ones(3, np.float32)  # skipped with a warning
    wts_text.write(tmp_path / "weights.wts", weights)
    (tmp_path / "detector.net").write_text(DETECTOR)

    il2json = python("-m", "lightnet.frontends.il", "--preprocessor", preprocessor,
                     "detector.net", cwd=tmp_path)
    assert il2json.returncode == 0, il2json.stderr
    run = lightnet("-f", "weights.wts", "-", stdin=il2json.stdout, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ("lightnet: warning: weights.wts: ignoring weight 'unused_tensor', "
                          "which the model does not create from a file\n")
    got = _printed(run.stdout)

    want_boxes, want_classes, want_scores = _detector_reference(
        {n: a.astype(np.float64) for n, a in weights.items()})
    assert np.all(-np.diff(want_scores) > 1e-4)  # a clear order: float32 cannot swap them
    np.testing.assert_array_equal(got["top_classes"], want_classes)
    np.testing.assert_allclose(got["top_scores"], want_scores, atol=1.5e-3)
    np.testing.assert_allclose(got["top_boxes"], want_boxes.reshape(-1), atol=1.5e-3)
    # the data exercises what it should: several classes, boxes inside the image
    assert len(set(want_classes)) > 1
    assert np.mean((want_boxes > 0) & (want_boxes < IMG_H - 1)) > 0.5


def test_session_seed():
    """A Session seeds create's random values as its Context does."""
    from lightnet import Session

    relu = {"name": "r", "optype": "relu", "tensors_in": [{"arg_name": "src", "name": "a"}],
            "tensors_out": [{"arg_name": "dst", "name": "y"}], "params": []}
    model = {"ops": [create("a", [50], ran=[0, 1]), relu]}
    same = Session(model, target="cpu").run()["y"]
    np.testing.assert_array_equal(same, loaded([create("a", [50], ran=[0, 1])]).get_data("a"))
    np.testing.assert_array_equal(same, Session(model, target="cpu", seed=0).run()["y"])
    assert not np.array_equal(same, Session(model, target="cpu", seed=3).run()["y"])
