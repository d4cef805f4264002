"""The dnnl architecture: oneDNN (capi: the C API through ctypes), the primitives its
ops create at load and call per run (primitives), what the dnnl ops' descriptions call
(ops), the layout pass (layout_pass), and what the core knows of it (arch)."""
