"""Packaging (issue #49): what a wheel carries, and the virtual environments CI builds on the running one.

The end-to-end check — the wheel installed outside the checkout running the user's commands — is .ci/wheel_check
(CI's step 3); these are its fast parts.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERED_VENV = ROOT / ".ci" / "layered_venv.py"
PROBE = "deep_nmt_ci_probe"  # a distribution that exists only in the "contributor's" virtual environment


def _setuptools_for_offline_build() -> bool:
    """setuptools that builds the sdist and the wheel with no download (70.1 and later need no `wheel` package)."""
    from packaging.version import Version

    try:
        return Version(importlib.metadata.version("setuptools")) >= Version("70.1")
    except importlib.metadata.PackageNotFoundError:
        return False


BUILD_LOG: list[str] = []  # what `python -m build` printed for the `built` fixture


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist and the wheel built from it, as `python -m build` makes them (no network: --no-isolation)."""
    if not _setuptools_for_offline_build():
        pytest.skip("setuptools>=70.1 is not installed: building the wheel offline needs it")
    out = tmp_path_factory.mktemp("dist")
    # as a user's shell has it: byte-compiling on (PYTHONDONTWRITEBYTECODE makes setuptools warn that it is off)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    BUILD_LOG[:] = [result.stdout, result.stderr]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


@pytest.mark.slow
def test_the_build_is_warning_free_and_the_license_an_spdx_expression(built: tuple[Path, Path]) -> None:
    """Issue #59, item 5: `project.license` as a table is deprecated (setuptools 77 takes the SPDX string)."""
    _, wheel = built
    log = "\n".join(BUILD_LOG)
    warnings = [line for line in log.splitlines() if "warn" in line.lower() or "deprecat" in line.lower()]
    assert not warnings, "\n".join(warnings)
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        headers = archive.read(metadata).decode("utf-8").split("\n\n", 1)[0].splitlines()
    assert "License-Expression: Apache-2.0" in headers, headers


def _checkout_templates() -> list[str]:
    cards = ROOT / "model_cards"
    return sorted(
        str(p.relative_to(cards)) for p in cards.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )


@pytest.mark.slow
def test_wheel_carries_the_model_card_templates_inside_the_package(built: tuple[Path, Path]) -> None:
    from deep_nmt_hf import VARIANTS

    _, wheel = built
    names = set(zipfile.ZipFile(wheel).namelist())
    inside = {
        name.removeprefix("deep_nmt_hf/model_cards/")
        for name in names
        if name.startswith("deep_nmt_hf/model_cards/")
    }
    assert sorted(inside) == _checkout_templates()
    assert {"card.md.j2", "papers.yaml"} <= inside
    assert {
        f"variants/{variant}.md" for variant in VARIANTS
    } <= inside  # hub.render_model_card reads one per variant
    assert not any(name.startswith("model_cards/") for name in names), "templates as a top-level package"


@pytest.mark.slow
def test_wheel_carries_every_module_of_the_checkout(built: tuple[Path, Path]) -> None:
    _, wheel = built
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("deep_nmt_hf", "deep_nmt_hf_cli"):
        for module in (ROOT / package).rglob("*.py"):
            assert str(module.relative_to(ROOT)) in names, (
                f"{module.relative_to(ROOT)} is missing from {wheel.name}"
            )


@pytest.mark.slow
def test_sdist_carries_the_model_card_templates(built: tuple[Path, Path]) -> None:
    sdist, _ = built
    with tarfile.open(sdist) as archive:
        names = [member.name for member in archive.getmembers() if member.isfile()]
    top = names[0].split("/")[0]
    prefix = f"{top}/model_cards/"
    assert sorted(n.removeprefix(prefix) for n in names if n.startswith(prefix)) == _checkout_templates()
    assert f"{top}/setup.py" in names and f"{top}/MANIFEST.in" in names


def test_card_dir_is_the_checkouts_in_a_checkout() -> None:
    from deep_nmt_hf.publish import hub

    import_root = Path(hub.__file__).resolve().parents[2]  # deep_nmt_hf/publish/hub.py
    if import_root != ROOT:
        pytest.skip(f"deep_nmt_hf is imported from {import_root}, not from this checkout")
    assert hub.card_dir() == hub.CARD_DIR == ROOT / "model_cards"


# ------------------------------------------------------------------- .ci/layered_venv.py (issue #49, item 5)
def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _probe(python: Path, code: str) -> str:
    """`python -c code`'s output, run outside the checkout (so that the working directory imports nothing)."""
    run = subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True, cwd=python.parent.parent
    )
    return run.stdout.strip()


def _site_packages(python: Path) -> Path:
    return Path(_probe(python, "import sysconfig; print(sysconfig.get_path('purelib'))"))


def _install_probe(site_packages: Path, version: str) -> None:
    """A minimal installed distribution: a module and its dist-info."""
    (site_packages / f"{PROBE}.py").write_text(f"VERSION = {version!r}\n", encoding="utf-8")
    info = site_packages / f"{PROBE}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {PROBE}\nVersion: {version}\n", encoding="utf-8"
    )


VERSIONS = (
    "import importlib.metadata as m, importlib.util as u, json\n"
    "def version(name):\n"
    "    try:\n"
    "        return m.version(name)\n"
    "    except m.PackageNotFoundError:\n"
    "        return None\n"
    "spec = u.find_spec('deep_nmt_hf')\n"
    f"print(json.dumps([version('torch'), version('{PROBE}'), spec and spec.origin]))"
)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout")
def test_layered_venv_from_a_virtual_environment_sees_its_packages(tmp_path: Path) -> None:
    import json

    # a contributor's environment: a venv on the machine's interpreter and packages, plus one package of its own
    contributor = tmp_path / "contributor"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(contributor)],
        check=True,
    )
    _install_probe(_site_packages(_python(contributor)), "1.0")
    torch, probe, origin = json.loads(_probe(_python(contributor), VERSIONS))
    assert probe == "1.0"
    if sys.prefix == sys.base_prefix:  # the machine's Python, which has torch: the contributor's venv sees it
        assert torch == importlib.metadata.version("torch")

    # step 2's environment built from inside it (what .ci/run does): sees torch and the contributor's package
    lowest = tmp_path / "lowest"
    subprocess.run(
        [str(_python(contributor)), str(LAYERED_VENV), str(lowest)], check=True, capture_output=True
    )
    assert json.loads(_probe(_python(lowest), VERSIONS)) == [torch, "1.0", origin]
    # what is installed into it shadows the layer below, which stays as it was
    _install_probe(_site_packages(_python(lowest)), "2.0")
    assert json.loads(_probe(_python(lowest), VERSIONS))[1] == "2.0"
    assert _probe(_python(lowest), f"import {PROBE}; print({PROBE}.VERSION)") == "2.0"
    assert json.loads(_probe(_python(contributor), VERSIONS))[1] == "1.0"

    # the environment .ci/run built before (issue #49): the base interpreter's packages, not the contributor's
    old = tmp_path / "old"
    subprocess.run(
        [str(_python(contributor)), "-m", "venv", "--without-pip", "--system-site-packages", str(old)],
        check=True,
    )
    assert json.loads(_probe(_python(old), VERSIONS))[1] is None

    # the wheel check's environment: everything but an editable install of the checkout
    hidden = tmp_path / "hidden"
    subprocess.run(
        [str(_python(contributor)), str(LAYERED_VENV), str(hidden), "--hide-editable", "deep_nmt_hf"],
        check=True,
        capture_output=True,
    )
    expected_origin = None if origin and Path(origin).resolve().is_relative_to(ROOT) else origin
    assert json.loads(_probe(_python(hidden), VERSIONS)) == [torch, "1.0", expected_origin]


@pytest.mark.slow
def test_the_license_text_ships_in_the_sdist_and_the_wheel_and_the_urls_in_the_metadata(
    built: tuple[Path, Path],
) -> None:
    """Apache-2.0 is declared; its full text (LICENSE) travels with both distributions, and `project.urls` holds
    only true addresses (the license, the papers: the project has no public repository)."""
    sdist, wheel = built
    text = (ROOT / "LICENSE").read_bytes()
    assert b"Apache License" in text and b"Version 2.0, January 2004" in text and b"END OF TERMS" in text
    with tarfile.open(sdist) as archive:
        (member,) = [
            m for m in archive.getmembers() if m.name.count("/") == 1 and m.name.endswith("/LICENSE")
        ]
        assert archive.extractfile(member).read() == text
    with zipfile.ZipFile(wheel) as archive:
        (license_file,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_file) == text
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        headers = archive.read(metadata).decode("utf-8").split("\n\n", 1)[0].splitlines()
    assert "License-File: LICENSE" in headers, headers
    urls = [line.split(": ", 1)[1] for line in headers if line.startswith("Project-URL: ")]
    assert urls and all(", https://" in url for url in urls), urls
    assert not any("REPOSITORY" in url or "example" in url for url in urls), urls
