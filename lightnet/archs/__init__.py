"""The architectures LightNet compiles for, one package each: `cpu` (numpy's kernels)
and `dnnl` (oneDNN). Each holds its kernels or library binding, the glue its generated
ops call, and in `arch` what the core knows of it; lightnet.archs.registry is how the
core reads them (the Arch protocol), never by name."""
