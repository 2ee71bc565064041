"""tilekit: build, check and benchmark cuTile Rust kernel ports against cuTile Python, Triton and PyTorch.

Kernel side: ``kernel`` (the contract a kernel declares in kernels/<name>/spec.py), ``suite``
(its GPU suites, generated from that declaration), ``checks`` (op.py's argument checks).
Runtime side: ``port`` (what every op.py entry shares: pick the variant, call the export), ``ffi``
(load the cdylib, pack tensor descriptors), ``bench`` (CUPTI timing), ``autotune``. Report side (no GPU): ``records`` (perf record blocks, sanitize), ``compare``
(ratios, geomean, verdict), ``layout`` (output paths), ``markdown``, ``report`` (performance.md,
the CLI), ``correctness`` (correctness.md), ``charts``, ``validate``, ``summary``; ``sweep`` (shape sweeps over a kernel's grid: shards, merge, sweep.csv/md/svg).
``python -m tilekit`` is the CLI that Make calls.
"""
