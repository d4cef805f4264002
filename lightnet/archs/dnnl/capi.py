"""oneDNN's C API, the subset LightNet runs, through ctypes.

The library is the `libdnnl.so.3` of the installed `onednn-cpu-gomp` wheel (oneDNN
3.2 built with GNU OpenMP), found from that distribution's own file list: no path
is guessed and nothing is compiled. `library()` loads it once; where that cannot
be done (another platform, the wheel or libgomp missing) it raises Unavailable
with a one-line reason, and `unavailable_reason()` returns that line.

Names are oneDNN's own (`dnnl_f32`, `DNNL_ARG_SRC`, `dnnl_convolution_forward_
primitive_desc_create`), so that every value here can be looked up in, and is
checked against, the headers (tests/dnnl/test_capi_headers.py). A failing call
raises LightNetError naming the function and the status.

Above the raw functions sit thin owners of oneDNN objects (MemoryDesc, Memory,
PrimitiveDesc, Primitive, Attr), each destroying its handle when collected, and
`Execute`, a primitive bound to its memories: the one call a run makes.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.metadata
import math
import os
import platform
import struct
from ctypes import POINTER, c_char_p, c_float, c_int, c_int32, c_int64, c_size_t, c_uint, c_void_p

from lightnet.errors import LightNetError

DISTRIBUTION = "onednn-cpu-gomp"
SONAME = "libdnnl.so.3"

# Enumerations (values from oneapi/dnnl/dnnl_common_types.h and dnnl_types.h) ----------

# dnnl_status_t
dnnl_success = 0
dnnl_out_of_memory = 1
dnnl_invalid_arguments = 2
dnnl_unimplemented = 3
dnnl_last_impl_reached = 4
dnnl_runtime_error = 5
dnnl_not_required = 6
dnnl_invalid_graph = 7
dnnl_invalid_graph_op = 8
dnnl_invalid_shape = 9
dnnl_invalid_data_type = 10

# dnnl_data_type_t
dnnl_data_type_undef = 0
dnnl_f16 = 1
dnnl_bf16 = 2
dnnl_f32 = 3
dnnl_s32 = 4
dnnl_s8 = 5
dnnl_u8 = 6

# dnnl_engine_kind_t, dnnl_stream_flags_t
dnnl_cpu = 1
dnnl_stream_default_flags = 1

# dnnl_format_kind_t
dnnl_format_kind_any = 1
dnnl_blocked = 2

# dnnl_format_tag_t (letters are dimensions, outermost first; a block size and a
# letter: that dimension's innermost block)
dnnl_format_tag_any = 1
dnnl_acdb = 22
dnnl_aBcd16b = 78
dnnl_aBcd8b = 102
dnnl_acdeb = 33
dnnl_aBcde16b = 121
dnnl_aBcde8b = 142

# dnnl_prop_kind_t
dnnl_forward_inference = 96
# dnnl_rnn_direction_t
dnnl_unidirectional_left2right = 1
dnnl_unidirectional_right2left = 2

# dnnl_alg_kind_t
dnnl_convolution_direct = 0x1
dnnl_deconvolution_direct = 0xA
dnnl_eltwise_relu = 0x20
dnnl_eltwise_tanh = 0x21
dnnl_eltwise_elu = 0x22
dnnl_eltwise_square = 0x23
dnnl_eltwise_abs = 0x24
dnnl_eltwise_sqrt = 0x25
dnnl_eltwise_linear = 0x26
dnnl_eltwise_soft_relu = 0x27
dnnl_eltwise_hardsigmoid = 0x28
dnnl_eltwise_logistic = 0x29
dnnl_eltwise_exp = 0x2A
dnnl_eltwise_gelu_tanh = 0x2B
dnnl_eltwise_swish = 0x2C
dnnl_eltwise_log = 0x2D
dnnl_eltwise_clip = 0x2E
dnnl_eltwise_clip_v2 = 0x2F
dnnl_eltwise_pow = 0x30
dnnl_eltwise_gelu_erf = 0x31
dnnl_eltwise_round = 0x32
dnnl_eltwise_mish = 0x33
dnnl_eltwise_hardswish = 0x34
dnnl_pooling_max = 0x1FF
dnnl_pooling_avg_include_padding = 0x2FF
dnnl_pooling_avg_exclude_padding = 0x3FF
dnnl_lrn_across_channels = 0xAFF
dnnl_binary_add = 0x1FFF0
dnnl_binary_mul = 0x1FFF1
dnnl_binary_max = 0x1FFF2
dnnl_binary_min = 0x1FFF3
dnnl_binary_div = 0x1FFF4
dnnl_binary_sub = 0x1FFF5
dnnl_resampling_nearest = 0x2FFF0
dnnl_resampling_linear = 0x2FFF1
dnnl_reduction_max = 0x2FFF2
dnnl_reduction_min = 0x2FFF3
dnnl_reduction_sum = 0x2FFF4
dnnl_reduction_mul = 0x2FFF5
dnnl_reduction_mean = 0x2FFF6
dnnl_reduction_norm_lp_sum = 0x2FFF8
dnnl_reduction_norm_lp_power_p_sum = 0x2FFFA
dnnl_softmax_accurate = 0x30000
dnnl_softmax_log = 0x30001

# dnnl_normalization_flags_t
dnnl_normalization_flags_none = 0x0
dnnl_use_global_stats = 0x1
dnnl_use_scale = 0x2
dnnl_use_shift = 0x4
dnnl_fuse_norm_relu = 0x8

# dnnl_scratchpad_mode_t
dnnl_scratchpad_mode_user = 1

# dnnl_query_t
dnnl_query_impl_info_str = 8
dnnl_query_exec_arg_md = 255
dnnl_query_ndims_s32 = 256
dnnl_query_dims = 257
dnnl_query_data_type = 258
dnnl_query_submemory_offset_s64 = 259
dnnl_query_padded_dims = 260
dnnl_query_padded_offsets = 261
dnnl_query_format_kind = 262
dnnl_query_inner_nblks_s32 = 263
dnnl_query_inner_blks = 264
dnnl_query_inner_idxs = 265
dnnl_query_strides = 14

# dnnl_cpu_isa_t
dnnl_cpu_isa_default = 0x0
dnnl_cpu_isa_sse41 = 0x1
dnnl_cpu_isa_avx = 0x3
dnnl_cpu_isa_avx2 = 0x7
dnnl_cpu_isa_avx2_vnni = 0xF
dnnl_cpu_isa_avx2_vnni_2 = 0x1F
dnnl_cpu_isa_avx512_core = 0x27
dnnl_cpu_isa_avx512_core_vnni = 0x67
dnnl_cpu_isa_avx512_core_bf16 = 0xE7
dnnl_cpu_isa_avx512_core_fp16 = 0x1EF
dnnl_cpu_isa_avx512_core_amx = 0xFEF
dnnl_cpu_isa_avx512_core_amx_fp16 = 0x1FEF

# #defines of dnnl_common_types.h and dnnl_types.h
DNNL_MAX_NDIMS = 12
DNNL_ARG_SRC = 1
DNNL_ARG_SRC_1 = 2
DNNL_ARG_SRC_2 = 3
DNNL_ARG_DST = 17
DNNL_ARG_DST_2 = 19
DNNL_ARG_WEIGHTS = 33
DNNL_ARG_WEIGHTS_1 = 34
DNNL_ARG_WEIGHTS_2 = 35
DNNL_ARG_BIAS = 41
DNNL_ARG_MEAN = 49
DNNL_ARG_VARIANCE = 50
DNNL_ARG_SCALE = 51
DNNL_ARG_SHIFT = 52
DNNL_ARG_SCRATCHPAD = 80
DNNL_ARG_MULTIPLE_SRC = 1024
DNNL_ARG_ATTR_SCALES = 4096
DNNL_ARG_ATTR_ZERO_POINTS = 8192
DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE = 32768


def DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx: int) -> int:
    return DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE * (idx + 1)


STATUS_NAMES = {value: name for name, value in globals().copy().items() if name in (
    "dnnl_success", "dnnl_out_of_memory", "dnnl_invalid_arguments", "dnnl_unimplemented",
    "dnnl_last_impl_reached", "dnnl_runtime_error", "dnnl_not_required", "dnnl_invalid_graph",
    "dnnl_invalid_graph_op", "dnnl_invalid_shape", "dnnl_invalid_data_type")}
CPU_ISA_NAMES = {v: k[len("dnnl_cpu_isa_"):] for k, v in globals().items()
                 if k.startswith("dnnl_cpu_isa_")}
DATA_TYPES = {"float32": dnnl_f32, "float16": dnnl_f16, "bfloat16": dnnl_bf16,
              "int32": dnnl_s32, "int8": dnnl_s8, "uint8": dnnl_u8}

# Structures ------------------------------------------------------------------------------

dnnl_dims_t = c_int64 * DNNL_MAX_NDIMS


class dnnl_exec_arg_t(ctypes.Structure):
    _fields_ = [("arg", c_int), ("memory", c_void_p)]


# dnnl_exec_arg_t as `struct` packs it: native sizes and alignment are C's (the int, its
# padding, the handle).
EXEC_ARG = "iP"


class dnnl_version_t(ctypes.Structure):
    _fields_ = [("major", c_int), ("minor", c_int), ("patch", c_int), ("hash", c_char_p),
                ("cpu_runtime", c_uint), ("gpu_runtime", c_uint)]


# Functions: name -> (restype, argtypes). Handles are c_void_p, enums c_int. --------------

_H = c_void_p
_OUT = POINTER(c_void_p)
_DIMS = POINTER(c_int64)
FUNCTIONS = {
    "dnnl_version": (POINTER(dnnl_version_t), []),
    "dnnl_get_effective_cpu_isa": (c_int, []),
    "dnnl_engine_create": (c_int, [_OUT, c_int, c_size_t]),
    "dnnl_stream_create": (c_int, [_OUT, _H, c_uint]),
    "dnnl_memory_desc_create_with_tag": (c_int, [_OUT, c_int, _DIMS, c_int, c_int]),
    "dnnl_memory_desc_create_with_strides": (c_int, [_OUT, c_int, _DIMS, c_int, _DIMS]),
    "dnnl_memory_desc_create_submemory": (c_int, [_OUT, _H, _DIMS, _DIMS]),
    "dnnl_memory_desc_permute_axes": (c_int, [_OUT, _H, POINTER(c_int)]),
    "dnnl_memory_desc_reshape": (c_int, [_OUT, _H, c_int, _DIMS]),
    "dnnl_memory_desc_clone": (c_int, [_OUT, _H]),
    "dnnl_memory_desc_get_size": (c_size_t, [_H]),
    "dnnl_memory_desc_query": (c_int, [_H, c_int, c_void_p]),
    "dnnl_memory_desc_equal": (c_int, [_H, _H]),
    "dnnl_memory_desc_destroy": (c_int, [_H]),
    "dnnl_memory_create": (c_int, [_OUT, _H, _H, c_void_p]),
    "dnnl_memory_destroy": (c_int, [_H]),
    "dnnl_primitive_attr_create": (c_int, [_OUT]),
    "dnnl_primitive_attr_destroy": (c_int, [_H]),
    "dnnl_primitive_attr_set_scratchpad_mode": (c_int, [_H, c_int]),
    "dnnl_primitive_attr_set_post_ops": (c_int, [_H, _H]),
    "dnnl_primitive_attr_set_scales_mask": (c_int, [_H, c_int, c_int]),
    "dnnl_primitive_attr_set_zero_points_mask": (c_int, [_H, c_int, c_int]),
    "dnnl_post_ops_create": (c_int, [_OUT]),
    "dnnl_post_ops_destroy": (c_int, [_H]),
    "dnnl_post_ops_append_eltwise": (c_int, [_H, c_int, c_float, c_float]),
    "dnnl_post_ops_append_sum": (c_int, [_H, c_float, c_int32, c_int]),
    "dnnl_post_ops_append_binary": (c_int, [_H, c_int, _H]),
    "dnnl_convolution_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, c_int, _H, _H, _H, _H, _DIMS, _DIMS, _DIMS, _DIMS, _H]),
    "dnnl_deconvolution_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, c_int, _H, _H, _H, _H, _DIMS, _DIMS, _DIMS, _DIMS, _H]),
    "dnnl_matmul_primitive_desc_create": (c_int, [_OUT, _H, _H, _H, _H, _H, _H]),
    "dnnl_pooling_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, c_int, _H, _H, _DIMS, _DIMS, _DIMS, _DIMS, _DIMS, _H]),
    "dnnl_eltwise_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, c_int, _H, _H, c_float, c_float, _H]),
    "dnnl_binary_primitive_desc_create": (c_int, [_OUT, _H, c_int, _H, _H, _H, _H]),
    "dnnl_concat_primitive_desc_create": (
        c_int, [_OUT, _H, _H, c_int, c_int, POINTER(c_void_p), _H]),
    "dnnl_batch_normalization_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, _H, _H, c_float, c_uint, _H]),
    "dnnl_layer_normalization_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, _H, _H, _H, c_float, c_uint, _H]),
    "dnnl_lrn_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, c_int, _H, _H, c_int64, c_float, c_float, c_float, _H]),
    "dnnl_softmax_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, c_int, _H, _H, c_int, _H]),
    "dnnl_resampling_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, c_int, POINTER(c_float), _H, _H, _H]),
    "dnnl_reduction_primitive_desc_create": (c_int, [_OUT, _H, c_int, _H, _H, c_float, c_float, _H]),
    "dnnl_shuffle_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, _H, _H, c_int, c_int64, _H]),
    "dnnl_reorder_primitive_desc_create": (c_int, [_OUT, _H, _H, _H, _H, _H]),
    # (engine, prop_kind, direction, src_layer, src_iter, src_iter_c, weights_layer,
    # weights_iter, weights_peephole, weights_projection, bias, dst_layer, dst_iter,
    # dst_iter_c, flags, attr)
    "dnnl_lstm_forward_primitive_desc_create": (
        c_int, [_OUT, _H, c_int, c_int, _H, _H, _H, _H, _H, _H, _H, _H, _H, _H, _H, c_uint, _H]),
    "dnnl_primitive_desc_query": (c_int, [_H, c_int, c_int, c_void_p]),
    "dnnl_primitive_desc_query_md": (c_void_p, [_H, c_int, c_int]),
    "dnnl_primitive_desc_destroy": (c_int, [_H]),
    "dnnl_primitive_create": (c_int, [_OUT, _H]),
    "dnnl_primitive_execute": (c_int, [_H, _H, c_int, POINTER(dnnl_exec_arg_t)]),
    "dnnl_primitive_destroy": (c_int, [_H]),
}


# Loading ---------------------------------------------------------------------------------

class Unavailable(Exception):
    """oneDNN cannot be loaded here; the message is the one-line reason."""


def _library_path() -> str:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise Unavailable(f"oneDNN's wheel ({DISTRIBUTION}) exists for Linux x86_64 only, "
                          f"this is {platform.system()} {platform.machine()}")
    try:
        files = importlib.metadata.distribution(DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        raise Unavailable(f"the {DISTRIBUTION} package is not installed "
                          f"(pip install {DISTRIBUTION}==2023.2.0)") from None
    for f in files:
        if f.name == SONAME:
            return str(f.locate())
    raise Unavailable(f"the installed {DISTRIBUTION} has no {SONAME} in its file list")


def _status_error(result, func, args):
    if result != dnnl_success:
        raise LightNetError(f"oneDNN: {func.__name__} failed: "
                            f"{STATUS_NAMES.get(result, 'unknown status')} ({result})")
    return result


def bf16_support(isa: int) -> str | None:
    """How oneDNN computes bfloat16 on instruction set `isa` (a dnnl_cpu_isa_t: each
    ISA's bits hold those of the ISAs it extends): "native" with AVX-512 BF16 (and
    AMX) or AVX2 with AVX-NE-CONVERT, "emulated" on other AVX-512 CPUs (its
    kernels convert in software), None below (it has no fast bfloat16 kernels)."""
    if any(isa & bits == bits for bits in (dnnl_cpu_isa_avx512_core_bf16,
                                           dnnl_cpu_isa_avx2_vnni_2)):
        return "native"
    if isa & dnnl_cpu_isa_avx512_core == dnnl_cpu_isa_avx512_core:
        return "emulated"
    return None


class Library:
    """The loaded libdnnl: each function of FUNCTIONS as an attribute, typed;
    those returning dnnl_status_t raise LightNetError on failure."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.cdll = ctypes.CDLL(path)
        except OSError as e:
            raise Unavailable(f"cannot load {path}: {e}") from None
        for name, (restype, argtypes) in FUNCTIONS.items():
            try:
                func = getattr(self.cdll, name)
            except AttributeError:
                raise Unavailable(f"{path} has no function {name} (expected oneDNN 3.2)") \
                    from None
            func.restype, func.argtypes = restype, argtypes
            if restype is c_int and name not in ("dnnl_get_effective_cpu_isa",
                                                 "dnnl_memory_desc_equal"):
                func.errcheck = _status_error
            setattr(self, name, func)
        # The per-run call: a second, untyped handle on the function (indexing a CDLL
        # makes a new one), so ctypes converts nothing given ready-made arguments.
        self.execute_raw = self.cdll["dnnl_primitive_execute"]
        self.execute_raw.restype = c_int
        version = self.dnnl_version().contents
        self.version = f"{version.major}.{version.minor}.{version.patch}"
        isa = self.dnnl_get_effective_cpu_isa()
        self.isa = isa
        self.cpu_isa = CPU_ISA_NAMES.get(isa, "unknown")
        self.bf16 = bf16_support(isa)
        engine, stream = c_void_p(), c_void_p()
        self.dnnl_engine_create(ctypes.byref(engine), dnnl_cpu, 0)
        self.dnnl_stream_create(ctypes.byref(stream), engine, dnnl_stream_default_flags)
        self.engine, self.stream = engine, stream
        self._gomp = _loaded_gomp()

    def set_threads(self, n: int) -> int:
        """oneDNN's threads from now on (GNU OpenMP's count is the calling Python
        thread's: set it in the thread that runs the primitives); returns the previous
        count."""
        previous = self._gomp.omp_get_max_threads()
        self._gomp.omp_set_num_threads(n)
        return previous

    def threads(self) -> int:
        return self._gomp.omp_get_max_threads()


def _loaded_gomp():
    """The libgomp libdnnl was linked with (already in the process: never loaded anew)."""
    try:
        gomp = ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD)
    except OSError:
        raise Unavailable("libdnnl is loaded but its libgomp.so.1 is not") from None
    gomp.omp_get_max_threads.restype = c_int
    gomp.omp_get_max_threads.argtypes = []
    gomp.omp_set_num_threads.restype = None
    gomp.omp_set_num_threads.argtypes = [c_int]
    return gomp


# How long a GNU OpenMP thread spins (busy-waits) after a parallel region before it
# sleeps, unless the environment says (OMP_WAIT_POLICY or GOMP_SPINCOUNT): 20,000
# spins, about half a millisecond on the bench machine, catch the next primitive of a
# run and the next run of a busy server, so neither pays a wake-up (~50 us each, far
# more on a virtual machine whose idle cores sleep: 3,000 spins ran MobileNet v2 3.5x
# slower after a pause). libgomp's own default (300,000, several milliseconds) wastes
# 15x longer whenever a thread waits for a peer the scheduler has parked, which made
# models 30-60x slower on a machine other busy processes share; there PASSIVE (no
# spinning) is the better choice (docs/performance.md, "The wait policy").
SPIN_COUNT = "20000"


def _with_spin_count(load):
    """Call `load` (which loads libdnnl and so its libgomp) with GOMP_SPINCOUNT set to
    SPIN_COUNT when the environment chooses no wait policy; libgomp reads it once,
    when it is loaded. The process's environment is left as it was."""
    try:
        ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD)
        return load()  # loaded already: its policy is settled
    except OSError:
        pass
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return load()
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        return load()
    finally:
        del os.environ["GOMP_SPINCOUNT"]


@functools.cache
def _load() -> Library | Unavailable:
    try:
        path = _library_path()
        return _with_spin_count(lambda: Library(path))
    except Unavailable as e:
        return e


def library() -> Library:
    """The loaded oneDNN; Unavailable (with the reason) where it cannot load."""
    lib = _load()
    if isinstance(lib, Unavailable):
        raise lib
    return lib


def unavailable_reason() -> str | None:
    """Why oneDNN cannot be used here, in one line; None when it can."""
    lib = _load()
    return str(lib) if isinstance(lib, Unavailable) else None


def threads(n: int | None):
    """A context: oneDNN's threads = `n` inside the block, as before after it. None, or a
    process that has not loaded oneDNN (a model without dnnl ops), changes nothing, at
    no cost (Context.run enters this on every run)."""
    if n is None or _load.cache_info().currsize == 0 or isinstance(_load(), Unavailable):
        return _UNCHANGED
    return _threads_set(_load(), n)


_UNCHANGED = contextlib.nullcontext()


@contextlib.contextmanager
def _threads_set(lib: Library, n: int):
    previous = lib.set_threads(n)
    try:
        yield
    finally:
        lib.set_threads(previous)


# Owners of oneDNN objects -----------------------------------------------------------------

def dims(values) -> dnnl_dims_t:
    values = [int(v) for v in values]
    if len(values) > DNNL_MAX_NDIMS:
        raise ValueError(f"oneDNN takes at most {DNNL_MAX_NDIMS} dimensions, "
                            f"found {len(values)}")
    return dnnl_dims_t(*values)


class _Owner:
    """Holds a handle and destroys it, once, when collected."""

    _destroy = ""

    def __init__(self, handle: c_void_p, lib: Library):
        self.handle = handle
        self._lib = lib

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle is not None and handle.value:
            getattr(self._lib, self._destroy)(handle)
            self.handle = None


# MemoryDesc.layout_id's numbers, by key.
_LAYOUT_IDS: dict[tuple, int] = {}


class MemoryDesc(_Owner):
    """A memory descriptor: logical dims, data type and a layout (a format tag,
    strides, `any` for the primitive to choose, or the blocked layout it chose)."""

    _destroy = "dnnl_memory_desc_destroy"

    @classmethod
    def with_tag(cls, shape, dtype: str, tag: int) -> MemoryDesc:
        lib = library()
        handle = c_void_p()
        lib.dnnl_memory_desc_create_with_tag(ctypes.byref(handle), len(shape), dims(shape),
                                             data_type(dtype), tag)
        return cls(handle, lib)

    @classmethod
    def with_strides(cls, shape, dtype: str, strides) -> MemoryDesc:
        """`strides` in elements, numpy's order."""
        lib = library()
        handle = c_void_p()
        lib.dnnl_memory_desc_create_with_strides(ctypes.byref(handle), len(shape), dims(shape),
                                                 data_type(dtype), dims(strides))
        return cls(handle, lib)

    def submemory(self, shape, offsets) -> MemoryDesc:
        """The part of this layout of `shape` at `offsets` (elements per dim): a memory
        made with it reads or writes that part of the whole tensor's buffer."""
        handle = c_void_p()
        self._lib.dnnl_memory_desc_create_submemory(ctypes.byref(handle), self.handle,
                                                    dims(shape), dims(offsets))
        return MemoryDesc(handle, self._lib)

    def transposed(self, axes) -> MemoryDesc:
        """This layout seen with its axes permuted like numpy's transpose(axes): dim i of
        the result is dim axes[i] of this one, the bytes where they are."""
        permutation = (c_int * len(axes))()
        for i, axis in enumerate(axes):
            permutation[axis] = i
        handle = c_void_p()
        self._lib.dnnl_memory_desc_permute_axes(ctypes.byref(handle), self.handle, permutation)
        return MemoryDesc(handle, self._lib)

    def reshaped(self, shape) -> MemoryDesc:
        """This layout seen with other dims of the same bytes in the same order (dims
        of 1 dropped or added, or a dim split or joined that no inner block divides)."""
        handle = c_void_p()
        self._lib.dnnl_memory_desc_reshape(ctypes.byref(handle), self.handle, len(shape),
                                           dims(shape))
        return MemoryDesc(handle, self._lib)

    @classmethod
    def clone(cls, borrowed: int | c_void_p) -> MemoryDesc:
        """An owned copy of a descriptor oneDNN lends (a primitive descriptor's)."""
        lib = library()
        handle = c_void_p()
        lib.dnnl_memory_desc_clone(ctypes.byref(handle), borrowed)
        return cls(handle, lib)

    def _query_int(self, what: int) -> int:
        out = c_int32()
        self._lib.dnnl_memory_desc_query(self.handle, what, ctypes.byref(out))
        return out.value

    def _query_dims(self, what: int) -> tuple[int, ...]:
        out = POINTER(c_int64)()
        self._lib.dnnl_memory_desc_query(self.handle, what, ctypes.byref(out))
        return tuple(out[i] for i in range(self.ndim)) if out else ()

    @property
    def ndim(self) -> int:
        return self._query_int(dnnl_query_ndims_s32)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._query_dims(dnnl_query_dims)

    @property
    def padded_shape(self) -> tuple[int, ...]:
        return self._query_dims(dnnl_query_padded_dims)

    @property
    def dtype(self) -> str:
        code = self._query_int(dnnl_query_data_type)
        return next((k for k, v in DATA_TYPES.items() if v == code), f"dnnl type {code}")

    @functools.cached_property  # a descriptor never changes
    def nbytes(self) -> int:
        """Bytes the memory takes in this layout, blocked padding included (0 for `any`)."""
        return self._lib.dnnl_memory_desc_get_size(self.handle)

    @property
    def is_any(self) -> bool:
        return self._query_int(dnnl_query_format_kind) == dnnl_format_kind_any

    @property
    def strides(self) -> tuple[int, ...]:
        """The stride of each logical dim, in elements (a blocked layout's outer ones)."""
        return self._blocking()[0]

    @property
    def format(self) -> str:
        """The layout in oneDNN's notation: dimensions a, b, c, ... outermost first,
        upper case when blocked, then the inner blocks: `abcd` is plain NCHW, `acdb`
        NHWC, `aBcd16b` NCHW with channels in blocks of 16; `any` before a primitive
        chose; `undef` for a descriptor that is not blocked."""
        kind = self._query_int(dnnl_query_format_kind)
        if kind == dnnl_format_kind_any:
            return "any"
        if kind != dnnl_blocked:
            return "undef"
        n = self.ndim
        strides, blks, idxs = self._blocking()
        padded = self.padded_shape
        # Outermost first: larger stride first; among equal strides (size-1 dims), the
        # larger padded size, then the logical order.
        order = sorted(range(n), key=lambda i: (-strides[i], -padded[i], i))
        letters = "".join(chr(ord("a") + i).upper() if i in idxs else chr(ord("a") + i)
                          for i in order)
        return letters + "".join(f"{b}{chr(ord('a') + i)}" for b, i in zip(blks, idxs))

    @property
    def unblocked(self) -> bool:
        """Whether the layout is strides alone (plain, or its dims in another order; a
        sub-memory's): no inner blocks, neither `any` nor `undef`."""
        form = self.format
        return form not in ("any", "undef") and form.isalpha() and form.islower()

    def _blocking(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """A blocked layout's outer strides (elements, per logical dim) and its inner
        blocks: their sizes and the dims they block, outermost first."""
        strides = self._query_dims(dnnl_query_strides)
        nblks = self._query_int(dnnl_query_inner_nblks_s32)
        blks = idxs = ()
        if nblks:
            out = POINTER(c_int64)()
            self._lib.dnnl_memory_desc_query(self.handle, dnnl_query_inner_blks,
                                             ctypes.byref(out))
            blks = tuple(out[i] for i in range(nblks))
            self._lib.dnnl_memory_desc_query(self.handle, dnnl_query_inner_idxs,
                                             ctypes.byref(out))
            idxs = tuple(out[i] for i in range(nblks))
        return strides, blks, idxs

    def is_block_of(self, whole: MemoryDesc, axis: int) -> bool:
        """Whether a tensor in this layout is, byte for byte, a contiguous block of
        `whole` (of the same layout and data type) along `axis`, wherever along it it
        starts at a multiple of its own size: every dim of `whole` laid out outside
        `axis` has size 1, the two share their inner blocks and the strides of every
        dim that spans more than one block, and this tensor's size along `axis` is a
        whole number of `axis`'s inner blocks. A concat's sources are then written
        straight into its output (`aBcd16b` channel blocks of a batch of 1)."""
        kinds = (self._query_int(dnnl_query_format_kind), whole._query_int(dnnl_query_format_kind))
        if kinds != (dnnl_blocked, dnnl_blocked) or self.dtype != whole.dtype:
            return False
        strides, blks, idxs = self._blocking()
        whole_strides, whole_blks, whole_idxs = whole._blocking()
        if (blks, idxs) != (whole_blks, whole_idxs) or self.padded_shape != self.shape:
            return False
        block = [math.prod(b for b, i in zip(blks, idxs) if i == d) for d in range(self.ndim)]
        if self.shape[axis] % block[axis]:
            return False
        padded = whole.padded_shape
        for d in range(self.ndim):
            if d != axis and padded[d] // block[d] > 1 and (
                    whole_strides[d] >= whole_strides[axis] or strides[d] != whole_strides[d]):
                return False
        return self.shape[axis] // block[axis] == 1 or strides[axis] == whole_strides[axis]

    @property
    def key(self) -> tuple:
        """What defines this layout, as a hashable value (computed once: a descriptor
        never changes): the dims, data type and format kind, and for a blocked layout its
        padded dims and offsets, its offset (a sub-memory's), strides and inner blocks.
        Two descriptors of equal keys are equal (oneDNN's `extra` flags, which only int8
        weights of some primitives carry, are not queried: no LightNet op has them)."""
        key = self.__dict__.get("_key")
        if key is None:
            kind = self._query_int(dnnl_query_format_kind)
            key = (self._query_dims(dnnl_query_dims), self._query_int(dnnl_query_data_type),
                   kind)
            if kind == dnnl_blocked:
                offset0 = c_int64()
                self._lib.dnnl_memory_desc_query(self.handle, dnnl_query_submemory_offset_s64,
                                                 ctypes.byref(offset0))
                key += (self._query_dims(dnnl_query_padded_dims),
                        self._query_dims(dnnl_query_padded_offsets), offset0.value,
                        *self._blocking())
            self.__dict__["_key"] = key
        return key

    @functools.cached_property
    def layout_id(self) -> int:
        """A number standing for `key` (descriptors of equal keys, and only they, have
        the same one): what a memory is cached by at load, hashed at once where the
        key is a nested tuple hashed anew at every look-up."""
        return _LAYOUT_IDS.setdefault(self.key, len(_LAYOUT_IDS))

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        return isinstance(other, MemoryDesc) and bool(
            self._lib.dnnl_memory_desc_equal(self.handle, other.handle))

    __hash__ = None

    def __repr__(self) -> str:
        return f"MemoryDesc({self.dtype}{list(self.shape)}, {self.format}, {self.nbytes} bytes)"


def data_type(dtype: str) -> int:
    try:
        return DATA_TYPES[str(dtype)]
    except KeyError:
        raise ValueError(f"oneDNN: no data type for {dtype} "
                            f"(known: {', '.join(DATA_TYPES)})") from None


class Memory(_Owner):
    """A memory object over a caller's buffer (never allocated by oneDNN): `address`
    is where its bytes start, in `owner` (e.g. an arena view), which the memory keeps
    alive: oneDNN writes there on every run."""

    _destroy = "dnnl_memory_destroy"

    def __init__(self, desc: MemoryDesc, address: int, owner):
        lib = library()
        handle = c_void_p()
        lib.dnnl_memory_create(ctypes.byref(handle), desc.handle, lib.engine, c_void_p(address))
        super().__init__(handle, lib)
        self.desc = desc
        self.owner = owner


class Attr(_Owner):
    """Primitive attributes: a user-managed scratchpad (always: it is planned in
    the arena), post-ops, each ("eltwise", alg, alpha, beta), ("sum", scale, zero point, data type) or
    ("binary", alg, MemoryDesc of the second operand), and an int8 primitive's scales
    and zero points, each {DNNL_ARG_*: mask} (mask 0: one value; bit d set: one per
    index of dimension d), their values given at run time (DNNL_ARG_ATTR_SCALES |
    arg, DNNL_ARG_ATTR_ZERO_POINTS | arg)."""

    _destroy = "dnnl_primitive_attr_destroy"

    def __init__(self, post_ops=(), scales=None, zero_points=None):
        lib = library()
        handle = c_void_p()
        lib.dnnl_primitive_attr_create(ctypes.byref(handle))
        super().__init__(handle, lib)
        lib.dnnl_primitive_attr_set_scratchpad_mode(handle, dnnl_scratchpad_mode_user)
        for arg, mask in (scales or {}).items():
            lib.dnnl_primitive_attr_set_scales_mask(handle, arg, mask)
        for arg, mask in (zero_points or {}).items():
            lib.dnnl_primitive_attr_set_zero_points_mask(handle, arg, mask)
        if post_ops:
            ops = c_void_p()
            lib.dnnl_post_ops_create(ctypes.byref(ops))
            try:
                for op in post_ops:
                    if op[0] == "eltwise":
                        lib.dnnl_post_ops_append_eltwise(ops, op[1], op[2], op[3])
                    elif op[0] == "sum":
                        lib.dnnl_post_ops_append_sum(ops, op[1], op[2], op[3])
                    elif op[0] == "binary":
                        lib.dnnl_post_ops_append_binary(ops, op[1], op[2].handle)
                    else:
                        raise ValueError(f"unknown post-op {op[0]!r}")
                lib.dnnl_primitive_attr_set_post_ops(handle, ops)
            finally:
                lib.dnnl_post_ops_destroy(ops)


class PrimitiveDesc(_Owner):
    """A primitive descriptor: made by one of the *_primitive_desc_create functions
    (`create(name, *args)`), it knows the layouts and scratchpad oneDNN chose."""

    _destroy = "dnnl_primitive_desc_destroy"

    @classmethod
    def create(cls, function: str, *args) -> PrimitiveDesc:
        """`args` after the output handle; owned objects (MemoryDesc, Attr) are passed as
        their handles, and stay alive through the call."""
        lib = library()
        handle = c_void_p()
        getattr(lib, function)(ctypes.byref(handle),
                               *(a.handle if isinstance(a, _Owner) else a for a in args))
        return cls(handle, lib)

    def arg_desc(self, arg: int) -> MemoryDesc | None:
        """The memory descriptor of execution argument `arg` (DNNL_ARG_*), None if the
        primitive takes no such argument."""
        md = self._lib.dnnl_primitive_desc_query_md(self.handle, dnnl_query_exec_arg_md, arg)
        return MemoryDesc.clone(md) if md else None

    @property
    def impl_info(self) -> str:
        """The implementation oneDNN chose, e.g. `brg:avx2` or `jit:avx2`."""
        out = c_char_p()
        self._lib.dnnl_primitive_desc_query(self.handle, dnnl_query_impl_info_str, 0,
                                            ctypes.byref(out))
        return out.value.decode()


class Primitive(_Owner):
    _destroy = "dnnl_primitive_destroy"

    def __init__(self, pd: PrimitiveDesc):
        lib = library()
        handle = c_void_p()
        lib.dnnl_primitive_create(ctypes.byref(handle), pd.handle)
        super().__init__(handle, lib)


class Execute:
    """A primitive bound to its memories, the argument array built once: calling it
    runs the primitive (with the GNU OpenMP runtime a CPU primitive has finished
    when the call returns)."""

    __slots__ = ("_call", "_keep", "name")

    def __init__(self, primitive: Primitive, memories: dict[int, Memory], name: str = ""):
        lib = primitive._lib
        n = len(memories)
        pairs = []
        for arg, memory in memories.items():
            pairs += (arg, memory.handle.value)
        # Packed from ints (4x faster than a structure made of each (arg, handle) pair).
        args = (dnnl_exec_arg_t * n).from_buffer_copy(struct.pack(EXEC_ARG * n, *pairs))
        self._call = functools.partial(lib.execute_raw, primitive.handle, lib.stream,
                                       c_int(n), args)
        self._keep = (primitive, memories, args)
        self.name = name

    def __call__(self) -> None:
        status = self._call()
        if status:
            raise LightNetError(f"oneDNN: dnnl_primitive_execute failed{self._of()}: "
                                f"{STATUS_NAMES.get(status, 'unknown status')} ({status})")

    def _of(self) -> str:
        return f" ({self.name})" if self.name else ""
