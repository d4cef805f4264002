"""The dnnl architecture's runtime: oneDNN (capi: the C API through ctypes) and the
primitives its ops create at load and call per run (primitives)."""
