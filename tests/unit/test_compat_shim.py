"""The `mininet` shim: importable through shim_path(), and only then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fidelnet.compat import shim_path

SRC = str(Path(__file__).resolve().parents[2] / "src")
MODULES = (
    "net",
    "node",
    "nodelib",
    "link",
    "topo",
    "topolib",
    "cli",
    "log",
    "util",
    "clean",
    "moduledeps",
)


def _python(code: str, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_shim_path_holds_the_package() -> None:
    path = Path(shim_path())
    assert (path / "mininet" / "__init__.py").is_file()
    for name in MODULES:
        assert (path / "mininet" / f"{name}.py").is_file(), name


def test_shim_reexports_fidelnet_compat() -> None:
    code = (
        "import importlib, mininet.net, mininet.topo\n"
        "import fidelnet.compat.net as n\n"
        "assert mininet.net.Mininet is n.Mininet\n"
        f"for m in {MODULES!r}:\n"
        "    shim = importlib.import_module('mininet.' + m)\n"
        "    real = importlib.import_module('fidelnet.compat.' + m)\n"
        "    assert shim.__all__ == real.__all__, m\n"
        "    assert all(getattr(shim, k) is getattr(real, k) for k in real.__all__), m\n"
        "print(mininet.__file__)\n"
    )
    result = _python(code, os.pathsep.join([shim_path(), SRC]))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(shim_path())


def test_no_mininet_without_the_shim_on_the_path() -> None:
    result = _python("import mininet", SRC)
    assert result.returncode != 0
    assert "No module named 'mininet'" in result.stderr
