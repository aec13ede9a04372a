"""Run a validated scenario: build, set up, send its traffic, judge its checks, tear
down; ``repeat`` times, each on a fresh network.

Every result is saved with its provenance and the floor under
``OUT/<scenario>/run-<i>/``; :func:`run_files` adds ``OUT/junit.xml`` and
``OUT/report.html``. Nothing here validates input: :func:`fidelnet.scenario.load`
has done that before anything is built.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fidelnet.errors import FidelnetError
from fidelnet.fidelity.thresholds import DEFAULT, Thresholds
from fidelnet.fidelity.verdict import Verdict, worst
from fidelnet.measure import save, tools
from fidelnet.measure.packets import udp, zero_loss_rate
from fidelnet.measure.tcp import tcp
from fidelnet.measure.verdicts import use_thresholds
from fidelnet.report.junit import CheckOutcome, SuiteOutcome
from fidelnet.retry import try_until
from fidelnet.scenario import model as m
from fidelnet.scenario.checks import Gate, Measured, PingResult, TrafficFailure, evaluate

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["ScenarioRun", "run_scenario"]

_PING_RE = re.compile(r"(\d+) packets transmitted, (\d+)( packets)? received")

Say = Callable[[str], None]


@dataclass
class ScenarioRun:
    """One run of a scenario: what was measured, each check's outcome, where the
    results are."""

    scenario: str
    index: int
    out: Path
    measured: dict[str, Measured] = field(default_factory=dict)
    checks: list[CheckOutcome] = field(default_factory=list)
    seconds: float = 0.0
    run_id: str = ""
    seed: int | None = None
    setup_error: str | None = None
    setup_waits: list[str] = field(default_factory=list)

    def verdicts(self) -> dict[str, Verdict]:
        """The verdict of each timed measurement, by traffic name."""
        out = {}
        for name, got in self.measured.items():
            verdict = getattr(got, "verdict", None)
            if isinstance(verdict, Verdict):
                out[name] = verdict
        return out

    @property
    def verdict(self) -> str:
        """The worst verdict of the run's measurements ("" when none was judged)."""
        found = self.verdicts()
        return worst(v.level for v in found.values()) if found else ""

    def verdict_line(self) -> str:
        """``degraded: load: engine released ...; ...`` for the console and JUnit."""
        found = self.verdicts()
        if not found:
            return "no timed measurement to judge"
        bad = [f"{name}: {v.summary(2)}" for name, v in found.items() if not v.trusted]
        return f"{self.verdict}" + (" — " + "; ".join(bad) if bad else "")

    def suite(self, repeats: int) -> SuiteOutcome:
        name = self.scenario if repeats == 1 else f"{self.scenario}[run {self.index + 1}]"
        return SuiteOutcome(
            name=name,
            checks=self.checks,
            seconds=self.seconds,
            timestamp=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            properties={
                "verdict": self.verdict or "not judged",
                "run_id": self.run_id,
                "seed": "" if self.seed is None else str(self.seed),
                "results": str(self.out),
                **{f"setup.{i}": text for i, text in enumerate(self.setup_waits)},
            },
        )

    @property
    def passed(self) -> bool:
        return all(c.status in ("passed", "skipped") for c in self.checks)


def _write_file(net: Network, step: m.FileStep, created: list[Path]) -> None:
    """Write a setup file in the node's view of the file system: a container node's
    own (it goes with the container), else this machine's, where every directory and
    file that did not exist before is added to ``created`` first (the run removes them
    at its end)."""
    node = net[step.node]
    writer = getattr(node.backend, "write_file", None)
    if writer is not None:
        writer(node, step.file.path, step.file.content, int(step.file.mode, 8))
        return
    path = Path(step.file.path)
    missing = [d for d in reversed(path.parents) if not d.exists()]
    for d in missing:
        created.append(d)
        d.mkdir()
    if not path.exists():
        created.append(path)
    path.write_text(step.file.content)
    os.chmod(path, int(step.file.mode, 8))


def _remove_created(created: list[Path]) -> None:
    """Remove what :func:`_write_file` created, newest first; a directory the run
    created goes with whatever its programs left in it (sockets, pid files)."""
    for path in reversed(created):
        with contextlib.suppress(FileNotFoundError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def _setup(net: Network, steps: list[m.SetupStep], created: list[Path]) -> list[str]:
    """Run the setup steps; returns what each step that waited took."""
    waited: list[str] = []
    for i, step in enumerate(steps):
        if isinstance(step, m.FileStep):
            _write_file(net, step, created)
            continue
        got = try_until(
            net,
            step.node,
            step.run,
            expect_exit=step.expect_exit,
            output=re.compile(step.output) if step.output is not None else None,
            timeout_s=step.timeout_s,
            wait_s=step.wait_s,
            interval_s=step.interval_s,
        )
        what = f"setup[{i}] on {step.node}: {' '.join(step.run)}"
        if not got.ok:
            if got.rc is None:
                why = f"timed out after {step.timeout_s:g} s"
            else:
                why = f"exited {got.rc}, expected {step.expect_exit}"
                if step.output is not None and got.rc == step.expect_exit:
                    why = f"output did not match /{step.output}/"
            within = f" (still failing after {got.seconds:.1f} s, {got.tries} tries)"
            raise FidelnetError(
                f"{what} {why}{within if step.wait_s else ''}: "
                f"{(got.err or got.out).strip()[-400:]}"
            )
        if step.wait_s is not None:
            waited.append(f"{what}: held after {got.seconds:.2f} s ({got.tries} tries)")
    return waited


def _ping(net: Network, item: m.Ping) -> PingResult:
    pairs = item.pairs_in(net.spec)

    def one(pair: tuple[str, str]) -> tuple[tuple[str, str], tuple[int, int]]:
        a, b = pair
        ip = net[b].ip
        if not ip:
            return pair, (item.count, 0)
        argv = ["ping", "-n", "-q", "-c", str(item.count), "-i", f"{item.interval_s:g}"]
        argv += ["-W", f"{max(item.timeout_s, 1.0):g}", ip]
        out, _err, _rc = tools.pexec(net[a], argv, timeout=item.count * (item.interval_s + 1) + 10)
        found = _PING_RE.search(out)
        return pair, ((int(found.group(1)), int(found.group(2))) if found else (item.count, 0))

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(pairs)))) as pool:
        return PingResult(dict(pool.map(one, pairs)))


def _traffic(net: Network, item: m.Traffic, out: Path) -> Measured:
    if isinstance(item, m.Ping):
        return _ping(net, item)
    if isinstance(item, m.Pktgen):
        spec = item.traffic_spec()
        return udp(
            net,
            item.src,
            item.dst,
            spec.rate_pps,
            size=spec.size,
            duration=spec.duration,
            pattern=spec.pattern,
            burst=spec.burst,
            flows=spec.flows,
            seed=spec.seed,
            mode=spec.mode,
            hdr_log=str(out / f"{item.name}.hlog"),
            events=[ev.to_event() for ev in item.events],
        )
    if isinstance(item, m.ZeroLoss):
        return zero_loss_rate(
            net,
            item.src,
            item.dst,
            size=item.size,
            low_pps=item.low_pps,
            high_pps=item.high_pps,
            trial_s=item.trial_s,
            resolution_pps=item.resolution_pps,
            pdr_loss=item.pdr_loss_ratio,
            pattern=item.pattern,
            burst=item.burst,
            max_trials=item.max_trials,
            mode=item.mode,
        )
    return tcp(
        net,
        item.flow_pairs,
        duration=item.duration_s,
        interval=item.interval_s,
        warmup=item.warmup_s,
        window=item.window_bytes,
        apply_window=item.apply_window,
        bidirectional=item.bidirectional,
    )


def _senders(item: m.Traffic) -> list[str]:
    if isinstance(item, (m.Pktgen, m.ZeroLoss)):
        return [item.src]
    if isinstance(item, m.Iperf):
        return sorted({a for a, _b in item.flow_pairs})
    return []


@contextlib.contextmanager
def _capture(net: Network, item: m.Traffic, out: Path, enabled: bool) -> Iterator[None]:
    """With ``enabled``, tcpdump on every interface of the item's sending nodes while
    it runs: ``OUT/pcap/<traffic>-<node>-<intf>.pcap``, headers only (96 bytes)."""
    procs: list[subprocess.Popen[bytes]] = []
    paths: list[Path] = []
    if enabled:
        (out / "pcap").mkdir(exist_ok=True)
        for name in _senders(item):
            for intf in net[name].intf_list():
                path = out / "pcap" / f"{item.name}-{name}-{intf.name}.pcap"
                paths.append(path)
                # --immediate-mode: packets still in an unretired TPACKET_V3 block are
                # lost when tcpdump stops (the last ~50 ms of a run, seen in tests).
                argv = ["tcpdump", "-q", "-n", "-s", "96", "-U", "--immediate-mode"]
                argv += ["-i", intf.name, "-w", str(path)]
                procs.append(
                    net[name].popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
        # tcpdump writes the file header once its capture socket is open: wait for it,
        # so the first packets are not missed.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
            q.exists() and q.stat().st_size >= 24 for q in paths
        ):
            time.sleep(0.02)
    try:
        yield
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_scenario(
    scenario: m.Scenario,
    out: Path,
    *,
    index: int = 0,
    say: Say = lambda _m: None,
    pcap: bool = False,
    thresholds: Thresholds = DEFAULT,
    baseline: Path | None = None,
) -> ScenarioRun:
    """One run on a fresh network. Setup failures and traffic failures become
    ``error`` outcomes of the checks they affect; the network is always torn down.
    Every timed measurement is monitored and judged with ``thresholds``. Files and
    directories the setup created are removed at the end."""
    t0 = time.monotonic()
    run = ScenarioRun(scenario.name, index, out)
    out.mkdir(parents=True, exist_ok=True)
    say(f"{scenario.name}: building")
    created: list[Path] = []
    try:
        gate = Gate(baseline, out, f"{out.parent.name}/{out.name}")
        _run_on_network(scenario, run, out, created, say, pcap, thresholds, gate)
    finally:
        _remove_created(created)  # after the network's processes are gone
    run.seconds = time.monotonic() - t0
    return run


def _run_on_network(
    scenario: m.Scenario,
    run: ScenarioRun,
    out: Path,
    created: list[Path],
    say: Say,
    pcap: bool,
    thresholds: Thresholds,
    gate: Gate,
) -> None:
    from fidelnet.network import Network

    with Network(scenario.topology_spec(), command=f"fidelnet test {scenario.name}") as net:
        run.run_id, run.seed = net.run_id, net.seed
        try:
            run.setup_waits = _setup(net, scenario.setup, created)
        except FidelnetError as exc:
            run.setup_error = str(exc)
        if run.setup_error is None:
            for item in scenario.traffic:
                say(f"{scenario.name}: traffic {item.name} ({item.type})")
                try:
                    with _capture(net, item, out, pcap), use_thresholds(thresholds):
                        got = _traffic(net, item, out)
                except FidelnetError as exc:
                    got = TrafficFailure(str(exc))
                run.measured[item.name] = got
                if not isinstance(got, (PingResult, TrafficFailure)):
                    save(out, item.name, got, net)
                elif isinstance(got, PingResult):
                    doc = {
                        f"{a}->{b}": {"sent": s, "received": r}
                        for (a, b), (s, r) in got.pairs.items()
                    }
                    (out / "ping").mkdir(exist_ok=True)
                    (out / "ping" / f"{item.name}.json").write_text(json.dumps(doc, indent=1))
            say(f"{scenario.name}: checks")
            run.checks = evaluate(net, scenario.checks, run.measured, thresholds, gate)
        else:
            run.checks = [
                CheckOutcome(name=c.key, status="error", message=run.setup_error, classname=c.type)
                for c in scenario.checks
            ]
