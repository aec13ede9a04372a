"""The `fidelnet` command starts without importing what its command does not use.

Each check runs a fresh interpreter and asserts on the set of modules it imported,
never on time: a module that is not imported costs nothing on any machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from fidelnet.cli.main import COMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.yaml"))

# What no light command may import: the kernel layer's netlink library (its NDB
# above all), plotting, and the modules that build networks.
HEAVY = (
    "matplotlib",
    "numpy",
    "pyroute2",
    "pyroute2.ndb",
    "fidelnet.network",
    "fidelnet.links.drivers",
    "fidelnet.kernel.tc",
    "fidelnet.kernel.netlink",
)


def _modules_after(code: str, tmp_path: Path) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (which may end in
    SystemExit, as click's commands do)."""
    out = tmp_path / "modules.json"
    body = textwrap.indent(textwrap.dedent(code).strip(), "    ")
    script = (
        "import json, sys\n"
        f"try:\n{body}\n"
        "except SystemExit:\n    pass\n"
        f"with open({str(out)!r}, 'w') as f:\n    json.dump(sorted(sys.modules), f)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(out.read_text()))


def _run_cli(*argv: str) -> str:
    return f"""
    sys.argv = ["fidelnet", *{list(argv)!r}]
    from fidelnet.cli.main import main
    main()
    """


def test_importing_the_cli_imports_nothing_heavy(tmp_path: Path) -> None:
    mods = _modules_after("import fidelnet.cli.main", tmp_path)
    assert "click" in mods  # the probe works
    assert not mods & {*HEAVY, "pydantic", "rich", "yaml"}


def test_version_imports_nothing_heavy(tmp_path: Path) -> None:
    mods = _modules_after(_run_cli("--version"), tmp_path)
    assert not mods & {*HEAVY, "pydantic", "rich", "yaml"}
    assert not any(m.startswith("fidelnet.scenario") for m in mods)


def test_help_imports_no_subcommand(tmp_path: Path) -> None:
    mods = _modules_after(_run_cli("--help"), tmp_path)
    loaded = {entry.module for entry in COMMANDS.values()} & mods
    assert not loaded
    assert not mods & {*HEAVY, "pydantic", "rich"}


def test_runs_imports_nothing_heavy(tmp_path: Path) -> None:
    mods = _modules_after(_run_cli("runs"), tmp_path)
    assert "fidelnet.kernel.state" in mods
    assert not mods & {*HEAVY, "pydantic", "rich", "yaml"}


@pytest.mark.skipif(not EXAMPLES, reason="no example scenario files")
def test_validate_needs_the_model_and_not_the_kernel(tmp_path: Path) -> None:
    mods = _modules_after(_run_cli("validate", *EXAMPLES), tmp_path)
    assert "fidelnet.scenario.model" in mods and "pydantic" in mods
    # Neither the network nor the measurement results' models and the verdicts.
    assert not mods & {
        *HEAVY,
        "rich",
        "fidelnet.measure.results",
        "fidelnet.measure.verdicts",
        "fidelnet.fidelity.monitor",
    }


def test_import_fidelnet_defers_the_heavy_names(tmp_path: Path) -> None:
    mods = _modules_after("import fidelnet", tmp_path)
    assert not mods & {*HEAVY, "pydantic"}
    mods = _modules_after("import fidelnet; fidelnet.Network", tmp_path)
    assert "fidelnet.network" in mods


def test_the_kernel_layer_imports_pyroute2_without_its_ndb(tmp_path: Path) -> None:
    mods = _modules_after("import fidelnet.kernel.netlink", tmp_path)
    assert "pyroute2.iproute.linux" in mods
    assert not mods & {"pyroute2.ndb", "pyroute2.ndb.main", "pyroute2.ipdb", "pyroute2.cli"}


def test_pyroute2_stays_whole_for_code_that_shares_the_process() -> None:
    code = """
        import fidelnet.kernel.netlink as nl
        import pyroute2
        from pyroute2 import NDB, IPRoute
        from pyroute2 import config
        assert IPRoute is nl.IPRoute, (IPRoute, nl.IPRoute)
        assert NDB.__module__ == "pyroute2.ndb.main"
        assert pyroute2.__version__ and isinstance(pyroute2.__all__, list)
        assert config.__name__ == "pyroute2.config"
        print("whole")
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "whole", proc.stderr


def test_every_lazy_command_resolves_to_its_listed_help() -> None:
    ctx = click.Context(cli)
    for name, entry in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command), name
        assert command.get_short_help_str(10**6) == entry.short_help, (
            f"COMMANDS[{name!r}].short_help differs from the command's own help"
        )


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    listed = {
        line.split()[0]
        for line in result.output.split("Commands:", 1)[1].splitlines()
        if line.startswith("  ") and not line.startswith("    ")
    }
    names = set(cli.list_commands(click.Context(cli)))
    assert names == listed
    assert set(COMMANDS) <= names and {"mn", "runs", "clean", "compat-path", "doctor"} <= names


def test_an_unknown_command_names_the_choices() -> None:
    result = CliRunner().invoke(cli, ["nosuch"])
    assert result.exit_code == 2
    assert "No such command 'nosuch'" in result.output


def test_a_package_export_named_like_its_module_stays_the_export() -> None:
    import fidelnet.measure
    import fidelnet.measure.tcp  # binds the submodule on the package...

    assert isinstance(fidelnet.measure.tcp, types.FunctionType)  # ...as eager imports did
    from fidelnet.measure import selftest, tcp

    assert tcp.__module__ == "fidelnet.measure.tcp" and callable(selftest)
    assert "Network" in dir(__import__("fidelnet"))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = fidelnet.measure.Nope  # type: ignore[attr-defined]
