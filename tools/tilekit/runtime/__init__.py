"""What a kernel (kernels/<name>/op.py, spec.py, baselines.py) and a model import: the C ABI, the
entries' runtime, checks, autotune and its timer, PyTorch ops, the kernel contract, the kernel
families and the baselines' support, model modules. Imports nothing from tilekit.reports or
tilekit.testing (tilekit/__init__.py has the map)."""
