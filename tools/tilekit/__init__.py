"""tilekit: build, check and benchmark cuTile Rust kernel ports against cuTile Python, Triton and
PyTorch, and use them in models. Three subpackages, one per concern; imports run one way, down:

    testing  ->  reports  ->  runtime

- ``runtime``: what a kernel and a model import. A kernel's op.py, spec.py and baselines.py import
  only this: the C ABI (``ffi``), the entries' runtime (``port``: the ``entry`` decorator, the
  variant pick, the export call), argument checks (``checks``), ``autotune`` and the CUPTI timer it
  uses (``bench``), the statistics that settle a few-µs config's ratio (``settle``), PyTorch ops (``ops``), the kernel contract (``kernel``), the kernel families
  (``norm``, ``gated``, ``mma`` and their baselines), the baselines' support (``baseline_support``,
  ``providers``, ``packages``, ``triton_tiles``, ``baseline_cases``), ``modules`` (model modules and
  the Hugging Face swap) and ``files`` (how every file the kit parses is read).
- ``reports``: no GPU; logs in, reports out: ``records`` (perf record blocks, sanitize),
  ``compare`` (ratios, geomean, verdict), ``report`` (performance.md), ``correctness``
  (correctness.md), ``summary``, ``validate``, ``charts``, ``markdown``, ``layout``,
  ``model_report`` (the model check's report).
- ``testing``: the harness that runs kernels and writes the logs: ``suite`` (the GPU suites,
  generated from a declaration), ``harness`` (what every suite does alike), ``pytest_plugin`` and
  ``stage_logs`` (records into raw logs), ``gpu_workers`` (GPUS=N), ``sweep``, ``model`` (the model
  check), ``fingerprint``, ``doctor``, ``scaffold`` (make new).

tests/kit/test_package_layout.py holds the direction and the absence of import circles.
``python -m tilekit`` is the CLI that Make calls (``__main__``).
"""
