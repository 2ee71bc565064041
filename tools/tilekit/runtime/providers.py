"""Baselines from the kernel libraries users already run ("providers"): the op as a user of that
library calls it, timed by the same harness as our own baselines (issue 14).

    tilegym       TileGym's cuTile Python ops: ``tilegym.set_backend("cutile")``, ``tilegym.ops.<op>``
    liger         Liger-Kernel's Triton kernels: ``liger_kernel.ops.<module>.Liger...Function``
    liger_cutile  Liger-Kernel's cuTile kernels: ``liger_kernel.ops.cutile.ops.<module>.Liger...Function``

Both Liger implementations live in one process because each is imported from its own submodules:
only the names re-exported by ``liger_kernel.ops`` itself are swapped by ``LIGER_KERNEL_IMPL``, the
submodules never are, so that variable is not needed. A kernels/<name>/baselines.py lists the
providers that have its op, each as a call taking the provider's ops and the entry's arguments
(or, where the provider has the op but timing it here would be unfair, the reason as text):

    BACKENDS = {..., **providers.backends(
        tilegym=lambda ops, x: ops.softmax(x),
        liger=lambda ops, x: ops.softmax.LigerSoftmaxFunction.apply(x),
    )}

Autograd functions run under ``torch.no_grad()`` (forward only, as our baselines). Nothing is
imported until a backend is asked for, so a baselines.py imports without these packages; the CPU
machine and the project venv have neither, and each case skips with its reason; they are default
BASELINES wherever a kernel declares them (docs/kernels.md). The GPU bundle carries the wheels (env/bundle-wheels.txt, --no-deps).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib import metadata


@dataclass(frozen=True)
class Provider:
    name: str  # the record name and the word in BASELINES
    dist: str  # the PyPI distribution
    pin: str  # the version env/bundle-wheels.txt carries
    ops: str  # the module its ops are read from
    cutile: bool  # runs on cuda.tile (and its tileiras)
    # The implementation its package's set_backend() selects, where it has that switch. `ops` is then
    # read whole, and its submodule of that name must have imported: tilegym swallows that import's
    # error (it warns) and would run every op on torch instead.
    backend: str | None = None

    @property
    def env_key(self) -> str:
        """The key of its version in a record's env (like ``cuda_tile``)."""
        return self.dist.replace("-", "_")


PROVIDERS = {
    p.name: p
    for p in (
        Provider("tilegym", "tilegym", "1.5.1", "tilegym.ops", cutile=True, backend="cutile"),
        Provider("liger", "liger-kernel", "0.8.5", "liger_kernel.ops", cutile=False),
        Provider("liger_cutile", "liger-kernel", "0.8.5", "liger_kernel.ops.cutile.ops", cutile=True),
    )
}
NAMES = tuple(PROVIDERS)


def version(name: str) -> str | None:
    """The installed version of a provider's distribution, or None (read without importing it)."""
    try:
        return metadata.version(PROVIDERS[name].dist)
    except metadata.PackageNotFoundError:
        return None


class _Submodules:
    """``ops.rms_norm`` imports ``<root>.rms_norm`` on first use (Liger's ops are submodules)."""

    def __init__(self, root: str) -> None:
        self._root = root

    def __getattr__(self, name: str):
        module = importlib.import_module(f"{self._root}.{name}")
        setattr(self, name, module)
        return module


def submodule(ops, path: str):
    """The module `path` (dotted) below a provider's ops, even where its package binds that name to
    something else (tilegym.ops.cutile binds `rms_norm` to its forward function, shadowing the
    submodule that holds its backward): imported by name from a real module, else (Liger's lazy
    submodules, a test's stand-in) read attribute by attribute."""
    import types

    if isinstance(ops, types.ModuleType):
        return importlib.import_module(f"{ops.__name__}.{path}")
    return functools.reduce(getattr, path.split("."), ops)


def package_module(ops, path: str):
    """The module `path` (dotted) of a provider's package, beside its ops (TileGym's Liger suite,
    `suites.liger`, whose cuTile ops are not under tilegym.ops): imported from the package's root
    where `ops` is a real module, else (a test's stand-in) read attribute by attribute."""
    import types

    if isinstance(ops, types.ModuleType):
        return importlib.import_module(f"{ops.__name__.partition('.')[0]}.{path}")
    return functools.reduce(getattr, path.split("."), ops)


@functools.cache
def _load(name: str):
    """(ops, None), or (None, why the provider cannot run here); imported once per process."""
    from tilekit.runtime import packages

    p = PROVIDERS[name]
    if version(name) is None:
        return None, f"{p.dist} is not installed: pip install --no-deps {p.dist}=={p.pin} (the bundle carries it)"
    if p.cutile:
        _, error = packages.import_cutile()
        if error is not None:
            return None, f"{name} runs on cuda.tile: {packages.cutile_reason(error)}"
    try:
        ops = importlib.import_module(p.ops)  # its import errors here, not at the first call
        if p.backend is None:
            ops = _Submodules(p.ops)
        else:
            importlib.import_module(p.ops.partition(".")[0]).set_backend(p.backend)
            if getattr(ops, p.backend, None) is None:
                raise ImportError(f"{p.ops}.{p.backend} did not import ({p.dist} warned why)")
    except Exception as exc:  # an ImportError, or a package that fails while importing
        return None, f"{p.dist} {version(name)} failed to import {p.ops}: {type(exc).__name__}: {exc}"
    return ops, (packages.tileiras_missing() if p.cutile else None)


def unavailable_reason(name: str) -> str | None:
    """Why provider `name` cannot run here, or None when its ops import (says nothing of the GPU)."""
    return _load(name)[1]


@dataclass(frozen=True)
class Entry:
    """One provider's entry of a baselines.py: called with the entry's arguments."""

    provider: str
    call: object  # (ops, *args) -> output, or the reason (str) this op is not timed from it

    def reason(self) -> str | None:
        return self.call if isinstance(self.call, str) else unavailable_reason(self.provider)

    def __call__(self, *args):
        import torch

        reason = self.reason()
        if reason:
            raise RuntimeError(f"{self.provider}: {reason}")
        with torch.no_grad():
            return self.call(_load(self.provider)[0], *args)


def backends(**calls) -> dict:
    """{provider: Entry} of a baselines.py's BACKENDS, from provider=call keywords."""
    unknown = sorted(set(calls) - set(PROVIDERS))
    if unknown:
        raise ValueError(f"unknown provider {', '.join(unknown)}; known: {', '.join(PROVIDERS)}")
    return {name: Entry(name, call) for name, call in calls.items()}


def record_env(name: str) -> dict:
    """What a provider's records add to their env: its version ({} for our own backends)."""
    if name not in PROVIDERS:
        return {}
    return {PROVIDERS[name].env_key: version(name) or "not installed"}
