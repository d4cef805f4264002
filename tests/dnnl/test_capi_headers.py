"""What lightnet.archs.dnnl.capi declares against oneDNN's installed headers (the test
extra's onednn-devel-cpu-gomp): every enum value and #define, the structures' fields,
and every function's return and parameter types."""

import ctypes
import sys
from pathlib import Path

import pytest

from lightnet.archs.dnnl import capi

sys.path.insert(0, str(Path(__file__).parent))
import cheaders  # noqa: E402

HEADERS = cheaders.header_dir()
pytestmark = pytest.mark.skipif(HEADERS is None,
                                reason="oneDNN's headers (onednn-devel-cpu-gomp) are absent")


@pytest.fixture(scope="module")
def text():
    return cheaders.read(HEADERS)


def declared(prefix):
    return {k: v for k, v in vars(capi).items()
            if k.startswith(prefix) and isinstance(v, int) and not isinstance(v, bool)}


def test_every_enum_value(text):
    enums = cheaders.enums(text)
    values = declared("dnnl_")
    assert len(values) > 80  # the scan found the declarations
    wrong = {k: (v, enums.get(k)) for k, v in values.items() if enums.get(k) != v}
    assert not wrong, f"declared vs header: {wrong}"


def test_every_define(text):
    defines = cheaders.defines(text)
    values = declared("DNNL_")
    assert "DNNL_ARG_SCRATCHPAD" in values
    wrong = {k: (v, defines.get(k)) for k, v in values.items() if defines.get(k) != v}
    assert not wrong, f"declared vs header: {wrong}"
    # The post-op argument macro, DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx).
    assert "(DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE * ((idx) + 1))" in " ".join(text.split())
    assert capi.DNNL_ARG_ATTR_MULTIPLE_POST_OP(2) == 3 * defines[
        "DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE"]


# How each C type of the declared functions and structures is passed through ctypes.
# Handles (pointers to opaque structs) and void * are c_void_p; enums are int.
_HANDLES = {"dnnl_engine_t", "dnnl_stream_t", "dnnl_memory_desc_t", "const_dnnl_memory_desc_t",
            "dnnl_memory_t", "dnnl_primitive_desc_t", "const_dnnl_primitive_desc_t",
            "dnnl_primitive_attr_t", "const_dnnl_primitive_attr_t", "dnnl_post_ops_t",
            "const_dnnl_post_ops_t", "dnnl_primitive_t", "const_dnnl_primitive_t", "void*",
            "const char*"}
_ENUMS = {"dnnl_status_t", "dnnl_engine_kind_t", "dnnl_data_type_t", "dnnl_format_tag_t",
          "dnnl_prop_kind_t", "dnnl_alg_kind_t", "dnnl_query_t", "dnnl_scratchpad_mode_t",
          "dnnl_cpu_isa_t", "dnnl_rnn_direction_t", "int"}
_SCALARS = {"unsigned": ctypes.c_uint, "size_t": ctypes.c_size_t, "float": ctypes.c_float,
            "int32_t": ctypes.c_int32, "dnnl_dim_t": ctypes.c_int64}


def _expected(ctype: str):
    """The ctypes type capi must use for C type `ctype` (as the header spells it)."""
    ctype = ctype.strip()
    if ctype in _HANDLES:
        return ctypes.c_char_p if ctype == "const char*" else ctypes.c_void_p
    if ctype in _ENUMS:
        return ctypes.c_int
    if ctype in _SCALARS:
        return _SCALARS[ctype]
    if ctype == "const dnnl_dims_t":
        return ctypes.POINTER(ctypes.c_int64)
    if ctype == "const float*":
        return ctypes.POINTER(ctypes.c_float)
    if ctype == "const int*":
        return ctypes.POINTER(ctypes.c_int)
    if ctype == "const dnnl_exec_arg_t*":
        return ctypes.POINTER(capi.dnnl_exec_arg_t)
    if ctype == "const dnnl_version_t*":
        return ctypes.POINTER(capi.dnnl_version_t)
    if ctype == "const_dnnl_memory_desc_t const*":
        return ctypes.POINTER(ctypes.c_void_p)
    if ctype.endswith("*") and ctype[:-1] in _HANDLES:  # an output handle
        return ctypes.POINTER(ctypes.c_void_p)
    raise AssertionError(f"no ctypes mapping for C type {ctype!r}")


def test_every_function_signature(text):
    prototypes = cheaders.prototypes(text)
    for name, (restype, argtypes) in capi.FUNCTIONS.items():
        assert name in prototypes, f"{name} is not in the headers"
        c_ret, c_params = prototypes[name]
        want_ret = _expected(c_ret)
        if c_ret == "const_dnnl_memory_desc_t":
            want_ret = ctypes.c_void_p
        assert restype == want_ret, f"{name}: returns {c_ret}, declared {restype}"
        assert len(argtypes) == len(c_params), f"{name}: {c_params} vs {argtypes}"
        for i, (ctype, declared_type) in enumerate(zip(c_params, argtypes)):
            assert declared_type == _expected(ctype), \
                f"{name}: parameter {i} is {ctype}, declared {declared_type}"


def test_structures(text):
    structs = cheaders.structs(text)
    for struct in (capi.dnnl_exec_arg_t, capi.dnnl_version_t):
        fields = structs[struct.__name__]
        assert [f for _, f in fields] == [f for f, _ in struct._fields_]
        for (ctype, field), (_, declared_type) in zip(fields, struct._fields_):
            want = ctypes.c_void_p if ctype == "dnnl_memory_t" else (
                ctypes.c_char_p if ctype == "const char*" else _expected(ctype))
            if ctype == "int":
                want = ctypes.c_int
            assert declared_type == want, f"{struct.__name__}.{field}: {ctype}"


def test_dims_array_length(text):
    assert capi.dnnl_dims_t._length_ == cheaders.defines(text)["DNNL_MAX_NDIMS"]
    assert "typedef dnnl_dim_t dnnl_dims_t[DNNL_MAX_NDIMS];" in text
    assert "typedef int64_t dnnl_dim_t;" in text


def test_the_reader_evaluates_implicit_and_aliased_values():
    text = """typedef enum { a_x = 0x10, a_y, a_z = a_x | 0x4U,
    #ifdef EXPERIMENTAL
    a_hidden,
    #endif
    a_w } a_t;"""
    assert cheaders.enums(text) == {"a_x": 16, "a_y": 17, "a_z": 20, "a_w": 21}
