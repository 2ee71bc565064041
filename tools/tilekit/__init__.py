"""tilekit: build, check and benchmark cuTile Rust kernel ports against cuTile Python, Triton and PyTorch.

Runtime side: ``ffi`` (load the cdylib, pack tensor descriptors), ``bench`` (CUPTI timing),
``autotune``. Report side (no GPU): ``records`` (perf record blocks, sanitize), ``compare``
(ratios, geomean, verdict), ``report`` (markdown), ``validate``. ``python -m tilekit`` is the CLI
that Make calls.
"""
