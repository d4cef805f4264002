"""The cpu architecture: numpy's kernels (kernels/, what the `_cpu` ops' descriptions
call), the threads of numpy's BLAS (blas), and what the core knows of it (arch)."""
