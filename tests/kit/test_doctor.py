"""make doctor's Tile IR checks on fake toolkit trees: the release of tileiras, the ptxas beside
it, and the CUDA_HOME trap (an older toolkit's libnvvm makes tileiras fail)."""

import stat

import pytest

from tilekit.testing import doctor


def fake_tree(root, release, *, ptxas_release=None, nvvm=True):
    """A CUDA-like tree whose tools print `release X.Y` like NVIDIA's do."""
    (root / "bin").mkdir(parents=True)
    tools = {"tileiras": release, "ptxas": ptxas_release or release}
    for name, rel in tools.items():
        if rel is None:
            continue
        tool = root / "bin" / name
        tool.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {rel}, V{rel}.1'\n")
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    if nvvm:
        (root / "nvvm" / "lib64").mkdir(parents=True)
        (root / "nvvm" / "lib64" / "libnvvm.so").write_bytes(b"")
    return root


@pytest.fixture
def env(monkeypatch):
    for var in ("CUTILE_TILEIRAS_PATH", "CUDA_TOOLKIT_PATH", "CUDA_HOME", "LD_LIBRARY_PATH"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def by_name(checks):
    return {c.name: c for c in checks}


def test_release_is_read_from_version_output_and_cuda_h():
    assert doctor.release_of("Cuda compilation tools, release 13.4, V13.4.92") == (13, 4)
    assert doctor.release_of("#define CUDA_VERSION 13020\n") == (13, 2)
    assert doctor.release_of("nothing here") is None


def test_matching_tree_is_all_ok(env, tmp_path):
    tree = fake_tree(tmp_path / "tc", "13.4")
    env.setenv("CUDA_TOOLKIT_PATH", str(tree))
    env.setenv("CUDA_HOME", str(tree))
    checks = by_name(doctor.check_tileir())
    assert [checks[n].status for n in ("tileiras", "ptxas beside tileiras", "libnvvm")] == ["ok", "ok", "ok"]


def test_older_cuda_home_is_flagged_with_the_fix(env, tmp_path):
    tree = fake_tree(tmp_path / "tc", "13.4")
    old = fake_tree(tmp_path / "cuda-13.0", "13.0")
    env.setenv("CUDA_TOOLKIT_PATH", str(tree))
    env.setenv("CUDA_HOME", str(old))
    nvvm = by_name(doctor.check_tileir())["libnvvm"]
    assert nvvm.status == "FAIL"
    assert "release 13.0, tileiras is 13.4" in nvvm.found
    assert any(f"export CUDA_HOME={tree}" in fix and "failed to compile Tile IR program" in fix for fix in nvvm.fixes)


def test_ptxas_of_another_release_is_flagged(env, tmp_path):
    tree = fake_tree(tmp_path / "tc", "13.4", ptxas_release="13.0")
    env.setenv("CUTILE_TILEIRAS_PATH", str(tree / "bin" / "tileiras"))
    checks = by_name(doctor.check_tileir())
    assert checks["tileiras"].found.endswith("via CUTILE_TILEIRAS_PATH, release 13.4")
    assert checks["ptxas beside tileiras"].status == "FAIL"


def test_tileiras_older_than_13_3_cannot_target_sm90(env, tmp_path):
    tree = fake_tree(tmp_path / "tc", "13.2")
    env.setenv("CUDA_TOOLKIT_PATH", str(tree))
    assert by_name(doctor.check_tileir())["tileiras"].status == "FAIL"


def test_prebuilt_bundle_skips_build_checks(env):
    env.setenv("TILEKIT_PREBUILT", "1")
    checks = doctor.build_checks()
    assert len(checks) == 1 and checks[0].status == "--"
