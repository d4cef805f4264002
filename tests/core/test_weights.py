"""lightnet.files.weight_file: .npz files (never unpickled) and LightNet's .wts
(lightnet.files.wts_text)."""

import os
import random

import numpy as np
import pytest

from lightnet.errors import LightNetError
from lightnet.files import weight_file, wts_text


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


# .npz ---------------------------------------------------------------------------------


def test_npz_read(tmp_path):
    arrays = {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b": np.array([-1.5, 2.25], dtype=np.float64),
        "i": np.array([[1, -2]], dtype=np.int8),
        "m": np.array([True, False]),
    }
    path = tmp_path / "w.npz"
    np.savez(path, **arrays)
    got = weight_file.read(path)
    assert sorted(got) == sorted(arrays)
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype and got[name].shape == a.shape
        np.testing.assert_array_equal(got[name], a)
    # Compressed archives and str paths work too.
    np.savez_compressed(tmp_path / "c.npz", **arrays)
    got = weight_file.read(str(tmp_path / "c.npz"))
    np.testing.assert_array_equal(got["w"], arrays["w"])


class Boom:
    """Unpickling this would create a directory: it must never happen."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_npz_with_pickled_objects_is_refused(tmp_path):
    marker = tmp_path / "unpickled"
    path = tmp_path / "evil.npz"
    np.savez(path, w=np.zeros(2, np.float32), o=np.array([Boom(str(marker)), 1], dtype=object))
    with pytest.raises(LightNetError) as e:
        weight_file.read(path)
    assert str(e.value) == f"{path}: holds pickled objects, which are never loaded"
    assert not marker.exists()


def test_missing_file(tmp_path):
    with pytest.raises(LightNetError) as e:
        weight_file.read(tmp_path / "nope.npz")
    assert str(e.value) == f"{tmp_path / 'nope.npz'}: no such weight file"
    with pytest.raises(LightNetError, match="no such weight file"):
        weight_file.read(tmp_path)  # a directory is no weight file


def test_truncated_npz(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, w=np.arange(1000, dtype=np.float32))
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 30):
        path.write_bytes(data[:cut])
        with pytest.raises(LightNetError) as e:
            weight_file.read(path)
        assert str(e.value).startswith(f"{path}: ")


def test_corrupt_npz_crc(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, w=np.arange(1000, dtype=np.float32))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the array data
    path.write_bytes(bytes(data))
    with pytest.raises(LightNetError) as e:
        weight_file.read(path)
    assert str(e.value) == f"{path}: not a valid .npz weight file: Bad CRC-32 for file 'w.npy'"


def test_damaged_npz_never_escapes_as_another_error(tmp_path):
    """Random damage to plain and compressed archives: always a LightNetError
    naming the file (zlib errors, bad headers and the like included)."""
    rng = random.Random(3)
    path = tmp_path / "d.npz"
    for save in (np.savez, np.savez_compressed):
        save(path, w=np.arange(300, dtype=np.float32), b=np.ones((3, 4)))
        data = path.read_bytes()
        for trial in range(150):
            b = bytearray(data)
            if trial % 3 == 0:
                for _ in range(rng.randint(1, 5)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            elif trial % 3 == 1:
                b = b[: rng.randrange(len(b))]
            else:
                k = rng.randrange(len(b))
                del b[k : k + rng.randint(1, 50)]
            path.write_bytes(bytes(b))
            try:
                weight_file.read(path)
            except LightNetError as e:
                assert str(e).startswith(f"{path}")
        path.write_bytes(data)


# LightNet's .wts -----------------------------------------------------------------------


def test_write_wts_exact(tmp_path):
    path = tmp_path / "w.wts"
    weights_out = {"w": np.float32([[1.0, -2.0], [0.5, 0.0]]), "q": np.int8([1, -1, -128])}
    wts_text.write(path, weights_out)
    assert path.read_text() == ("2\nw 0 4 3f800000 c0000000 3f000000 00000000\n"
                                "q 2 3 01 ff 80\n")


def test_wts_round_trip_is_bit_exact(tmp_path):
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4028235e38, -1.17549435e-38,
                        0.1, 123456.789], dtype=np.float32)
    rng = np.random.default_rng(0)
    tensors = {
        "special": special,
        "rand": (rng.standard_normal((3, 5, 7)) * 1e3).astype(np.float32),
        "bits": rng.integers(0, 2**32, size=200, dtype=np.uint64).astype(np.uint32).view(np.float32),
        "int8": rng.integers(-128, 128, size=50).astype(np.int8),
    }
    path = tmp_path / "w.wts"
    wts_text.write(path, tensors)
    got = weight_file.read(path)
    assert list(got) == list(tensors)
    for name, a in tensors.items():
        assert got[name].dtype == a.dtype
        assert got[name].shape == (a.size,)  # the format is flat
        np.testing.assert_array_equal(got[name].view(np.uint8), a.reshape(-1).view(np.uint8))


def test_wts_as_lightnet_reads_it(tmp_path):
    """Free whitespace, short hex (leading zeros), float16 converted, unknown skipped."""
    path = tmp_path / "w.wts"
    path.write_text("4\n  w 0 3 3f800000 1\n BF800000\nh 1 2 3c00 c000\n"
                    "skipped 0 2 0 0\nq 2 2 7f 80")
    warned = []
    got = weight_file.read(path, known=lambda name: name != "skipped", warn=warned.append)
    assert list(got) == ["w", "h", "q"]
    assert bits(got["w"]).tolist() == [0x3F800000, 1, 0xBF800000]
    assert got["w"][1] == np.float32(1.4e-45)  # "1" is 00000001: the smallest denormal
    assert got["h"].dtype == np.float32 and got["h"].tolist() == [1.0, -2.0]
    assert got["q"].dtype == np.int8 and got["q"].tolist() == [127, -128]
    assert warned == [f"{path}: ignoring weight 'skipped', which the model does not create "
                      "from a file"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "expected the number of tensors first, found an empty file"),
        ("w 0 1 0\n", "expected the number of tensors first, found 'w'"),
        ("2\nw 0 1 0\n", "the file says 2 tensors, but ends after 1"),
        ("1\nw x 1 0\n", "tensor 'w': expected 'NAME TYPE LEN' with a whole TYPE and LEN, "
                         "found 'w x 1'"),
        ("1\nw 0 -1\n", "tensor 'w': expected 'NAME TYPE LEN' with a whole TYPE and LEN, "
                        "found 'w 0 -1'"),
        ("1\nw 0 2 3f800000\n", "tensor 'w': expected 2 values, found 1 before the end of "
                                "the file"),
        ("1\nw 0 1 3f800000 0\n", "text after the 1 tensors the file announces: '0'"),
        ("2\nw 0 1 0\nw 0 1 0\n", "tensor 'w' is given twice"),
        ("1\nw 3 1 0\n", "tensor 'w': unknown TYPE 3 (0 is float32, 1 float16, 2 int8)"),
        ("1\nw 0 2 3f800000 zz\n", "tensor 'w': values must be hex digits"),
        ("1\nw 0 1 0x12\n", "tensor 'w': values must be hex digits"),
        ("1\nw 0 1 123456789\n", "tensor 'w': a value of TYPE 0 has at most 8 hex digits"),
        ("1\nw 2 1 100\n", "tensor 'w': a value of TYPE 2 has at most 2 hex digits"),
        ("1\nw 1 1 10000\n", "tensor 'w': a value of TYPE 1 has at most 4 hex digits"),
    ],
)
def test_wts_errors_name_file_and_tensor(tmp_path, text, message):
    path = tmp_path / "w.wts"
    path.write_text(text)
    with pytest.raises(LightNetError) as e:
        weight_file.read(path)
    assert str(e.value) == f"{path}: {message}"


def test_wts_write_refuses_what_the_format_cannot_hold(tmp_path):
    path = tmp_path / "w.wts"
    with pytest.raises(LightNetError, match=r"holds float32 and int8 tensors, not float64 \('d'\)"):
        wts_text.write(path, {"d": np.zeros(2)})
    with pytest.raises(LightNetError, match="tensor name 'a b' cannot be written"):
        wts_text.write(path, {"a b": np.zeros(2, np.float32)})


def test_binary_file_is_not_a_weight_file(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"\x93NUMPY\xff\xfe")
    with pytest.raises(LightNetError) as e:
        weight_file.read(path)
    assert str(e.value) == f"{path}: not a weight file (neither .npz nor LightNet's .wts text)"
