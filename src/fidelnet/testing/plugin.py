"""The fidelnet pytest plugin: a fresh emulated network per test, torn down always.

Registered through the ``pytest11`` entry point, so installing fidelnet is enough
(``-p no:fidelnet`` turns it off). It adds:

- the marker ``@pytest.mark.fidelnet_topology(spec_or_factory, **network_kwargs)``:
  a :class:`~fidelnet.topology.TopologySpec`, a callable returning one, or a
  Mininet ``--topo`` string such as ``"linear,3"``; the keyword arguments go to
  :class:`fidelnet.Network` (``engine_args``, ``command``, ...). Without a positional
  argument the topology comes from the ``fidelnet_topology`` fixture;
- the fixture ``fidelnet_topology`` (returns None: override it to give a topology
  to every test of a module or directory);
- the fixture ``fidelnet_net``: the started :class:`fidelnet.Network`, stopped after
  the test whatever the test did. Without root the test is skipped;
- the fixture ``fidelnet_results``: a per-test directory for
  :func:`fidelnet.measure.save`, named in the report of a failed test.

Importing this module imports nothing of fidelnet's own; the network code is
imported by the fixtures, so a test suite that does not use them pays nothing.
See docs/pytest-plugin.md.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.topology.spec import TopologySpec

__all__ = ["MARKER", "NEEDS_ROOT"]

MARKER = "fidelnet_topology"
NEEDS_ROOT = "needs root (creates network namespaces)"

_RESULTS_KEY = pytest.StashKey[Path]()
_REPORTS_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()
_NET_KEY = pytest.StashKey["Network"]()

_USAGE = (
    "give the test a topology: @pytest.mark.fidelnet_topology(spec) with a TopologySpec, "
    'a callable returning one, or a builder string such as "linear,3"; or override the '
    "fidelnet_topology fixture"
)


def _is_root() -> bool:
    """Whether this process may create network namespaces (patched by tests)."""
    return os.geteuid() == 0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(spec_or_factory, **network_kwargs): the topology fidelnet_net builds "
        '(a TopologySpec, a callable returning one, or a builder string like "linear,3")',
    )


# -- the topology -------------------------------------------------------------------


def _usage(problem: str, hint: bool = True) -> NoReturn:
    pytest.fail(f"fidelnet_net: {problem}" + (f"; {_USAGE}" if hint else ""), pytrace=False)


def _to_spec(value: object, origin: str) -> TopologySpec:
    """A fresh TopologySpec from what the marker or fixture gave."""
    from fidelnet.errors import ValidationError
    from fidelnet.topology.spec import TopologySpec

    if isinstance(value, str):
        from fidelnet.topology.builders import from_mn_spec

        try:
            return from_mn_spec(value)
        except ValidationError as exc:
            problem = f"{origin}: {exc}"
        _usage(problem, hint=False)  # outside the handler: no chained tracebacks
    if isinstance(value, TopologySpec):
        return copy.deepcopy(value)  # Network fills in ports and addresses: keep the original
    if callable(value):
        made = value()
        if isinstance(made, TopologySpec):
            return made
        _usage(f"{origin}: {value!r} returned {type(made).__name__}, not a TopologySpec")
    _usage(f"{origin} is {type(value).__name__}, not a topology")


def _topology(request: pytest.FixtureRequest) -> tuple[TopologySpec, dict[str, Any]]:
    mark = request.node.get_closest_marker(MARKER)
    kwargs: dict[str, Any] = dict(mark.kwargs) if mark is not None else {}
    if mark is not None and len(mark.args) > 1:
        _usage(f"the {MARKER} marker takes one topology, got {len(mark.args)} arguments")
    if mark is not None and mark.args:
        return _to_spec(mark.args[0], f"the {MARKER} marker's argument"), kwargs
    value = request.getfixturevalue("fidelnet_topology")
    if value is None:
        _usage("no topology")
    return _to_spec(value, "the fidelnet_topology fixture"), kwargs


@pytest.fixture
def fidelnet_topology() -> object:
    """The topology for ``fidelnet_net`` when the test has no marker argument: None
    here; override it (a TopologySpec, a callable returning one, or a builder string)."""
    return None


# -- the network --------------------------------------------------------------------


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _stop(net: Network) -> list[str]:
    """Stop ``net``; return what went wrong (fidelnet's errors, a state file kept)."""
    from fidelnet.kernel.state import STATE_DIR

    run_id = net.run_id if net.is_open else None
    errors = _Errors()
    logger = logging.getLogger("fidelnet")
    logger.addHandler(errors)
    try:
        net.stop()
    finally:
        logger.removeHandler(errors)
    problems = list(errors.messages)
    if run_id is not None:
        state = os.path.join(STATE_DIR, f"{run_id}.jsonl")
        if os.path.exists(state):
            problems.append(f"{state} kept: the run owns objects that were not removed")
    return problems


def _describe(problems: list[str], run: str) -> str:
    return f"fidelnet_net: teardown of {run} was incomplete:\n" + "\n".join(
        f"  {p}" for p in problems
    )


@pytest.fixture
def fidelnet_net(request: pytest.FixtureRequest) -> Iterator[Network]:
    """A started :class:`fidelnet.Network` for this test, built from the
    ``fidelnet_topology`` marker (or fixture), stopped after the test even when it
    fails; an incomplete teardown is reported as an error of the test."""
    spec, kwargs = _topology(request)
    if not _is_root():
        pytest.skip(NEEDS_ROOT)
    from fidelnet.network import Network

    try:
        inspect.signature(Network).bind(spec, **kwargs)
    except TypeError as exc:
        problem = f"the {MARKER} marker's keyword arguments do not fit fidelnet.Network: {exc}"
    else:
        problem = ""
    if problem:
        _usage(problem, hint=False)
    net = Network(spec, **kwargs)
    try:
        net.start()
    except BaseException:
        net.stop()  # start rolls back what it made; this only makes sure
        raise
    run = f"run {net.run_id}"
    request.node.stash[_NET_KEY] = net
    try:
        yield net
    finally:
        del request.node.stash[_NET_KEY]
        problems = _stop(net)
    if problems:
        pytest.fail(_describe(problems, run), pytrace=False)


# -- results ------------------------------------------------------------------------


@pytest.fixture
def fidelnet_results(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A directory of this test's own (under ``tmp_path``) for
    :func:`fidelnet.measure.save`; a failed test's report names it."""
    path = tmp_path / "fidelnet-results"
    path.mkdir(exist_ok=True)
    request.node.stash[_RESULTS_KEY] = path
    request.node.user_properties.append(("fidelnet_results", str(path)))
    return path


def _listing(path: Path, limit: int = 20) -> str:
    try:
        names = sorted(p.name for p in path.iterdir())
    except OSError as exc:
        return f"{path} (cannot be listed: {exc})"
    if not names:
        return f"{path} (empty)"
    shown = "\n".join(f"  {n}" for n in names[:limit])
    more = f"\n  ... and {len(names) - limit} more" if len(names) > limit else ""
    return f"{path}\n{shown}{more}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_REPORTS_KEY, {})[str(report.when)] = report
    if report.failed:
        net = item.stash.get(_NET_KEY, None)
        if net is not None and net.is_open:
            names = ", ".join(net.nodes)
            report.sections.append(("fidelnet network", f"run {net.run_id}: nodes {names}"))
        results = item.stash.get(_RESULTS_KEY, None)
        if results is not None:
            report.sections.append(("fidelnet results", _listing(results)))
    return report
