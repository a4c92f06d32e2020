"""Create a virtual environment layered on the running Python environment (issue #49, item 5).

    python .ci/layered_venv.py DEST [--hide-editable NAME]

DEST gets the running interpreter and, after its own site-packages, every site directory the running environment
imports from (a virtual environment's own, then whatever it inherits), with their ``.pth`` files run. So a package
installed into DEST (``DEST/bin/python -m pip install ...``, pip itself comes from the layers) shadows the one below
it, and everything else is shared. ``python -m venv --system-site-packages`` is not that: it inherits the *base*
interpreter's site-packages, so from inside a contributor's virtual environment it misses that environment's torch
(``PackageNotFoundError: No package metadata was found for torch``).

``--hide-editable NAME`` leaves out an editable install of NAME (its ``__editable__.NAME-*.pth`` is not run and no
directory holding ``NAME/__init__.py`` reaches sys.path through a ``.pth``): the wheel check installs the built wheel
into DEST and must import that, never the checkout.

.ci/run uses it for the lowest-release environment and the wheel check; tests/project/test_packaging.py runs it from a
virtual environment.
"""

from __future__ import annotations

import argparse
import os
import site
import subprocess
import sys
import venv
from pathlib import Path

LAYER_MODULE = "_layered_on"

# Written into DEST's site-packages as LAYER_MODULE.py; DEST's LAYER_MODULE.pth imports it at start-up.
LAYER_SOURCE = '''"""Written by .ci/layered_venv.py: this environment also imports from LAYERS, after its own site-packages."""

import os
import site
import sys

LAYERS = {layers!r}
HIDDEN = {hidden!r}  # an editable install of this distribution stays out of sys.path


def _hidden_pth(name):
    return HIDDEN is not None and name.startswith("__editable__." + HIDDEN + "-") and name.endswith(".pth")


def _add(directory):
    if not os.path.isdir(directory) or directory in sys.path:
        return
    before = set(sys.path)
    sys.path.append(directory)
    for name in sorted(os.listdir(directory)):
        if name.endswith(".pth") and not _hidden_pth(name):
            site.addpackage(directory, name, None)
    if HIDDEN is not None:  # a legacy develop install: a path line naming the checkout
        sys.path[:] = [
            entry for entry in sys.path
            if entry in before or entry == directory
            or not os.path.isfile(os.path.join(entry, HIDDEN, "__init__.py"))
        ]


for _directory in LAYERS:
    _add(_directory)
'''


def site_directories() -> list[str]:
    """The running environment's site directories, in sys.path's order (a venv's own before those it inherits)."""
    candidates = set(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        candidates.add(site.getusersitepackages())
    found = [entry for entry in dict.fromkeys(sys.path) if entry in candidates and os.path.isdir(entry)]
    if not found:
        raise SystemExit(f"no site directory of {sys.executable} is on sys.path ({sys.path})")
    return found


def create(dest: Path, hide_editable: str | None = None) -> Path:
    """Create DEST layered on the running environment; returns DEST's python."""
    layers = site_directories()
    venv.EnvBuilder(with_pip=False, clear=True, symlinks=os.name != "nt").create(dest)
    python = dest / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    # not `-S`: before Python 3.12 site.py is what sets sys.prefix to the venv
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    target = Path(purelib)
    if not target.resolve().is_relative_to(dest.resolve()):
        raise SystemExit(f"{python}'s site-packages {target} is outside {dest}")
    target.mkdir(parents=True, exist_ok=True)
    hidden = hide_editable.replace("-", "_") if hide_editable else None
    (target / f"{LAYER_MODULE}.py").write_text(
        LAYER_SOURCE.format(layers=layers, hidden=hidden), encoding="utf-8"
    )
    (target / f"{LAYER_MODULE}.pth").write_text(f"import {LAYER_MODULE}\n", encoding="utf-8")
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="the new virtual environment (replaced if it exists)")
    parser.add_argument("--hide-editable", metavar="NAME", help="leave out an editable install of NAME")
    args = parser.parse_args(argv)
    python = create(args.dest, args.hide_editable)
    layers = ", ".join(site_directories())
    print(f"{args.dest}: {sys.version.split()[0]} at {python}, layered on {layers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
