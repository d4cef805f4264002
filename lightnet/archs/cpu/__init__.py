"""The cpu architecture: numpy's kernels (kernels/, what the `_cpu` ops' descriptions
call) and the threads of numpy's BLAS (blas)."""
