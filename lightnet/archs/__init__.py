"""The architectures LightNet compiles for, one package each: `cpu` (numpy's kernels)
and `dnnl` (oneDNN). Each holds its kernels or library binding and the glue its
generated ops call; lightnet.archs.registry is how the core knows them."""
