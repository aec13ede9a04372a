"""`fidelnet clean` is finished when it returns (issue 40).

A run with engine links and iperf3 traffic is killed with SIGKILL at a random moment
of its build, its traffic or its teardown (seeded: ``FIDELNET_KILL_SEED``), then
`fidelnet clean` runs; the moment it returns, no process, namespace, interface,
cgroup or state file of the run may exist. Zombies count: a process killed by
`clean` is an orphan whose reaping is PID 1's, and `clean` waits for it.

The run's processes are known three ways: a sampler thread records every
descendant of the run's owner (pid and start time) while it lives, the state file
lists what the run recorded, and the run's cgroups list the rest (zombies too,
through ``/proc/PID/cgroup``). A calibration run first measures each phase (its
moments are drawn within them) and checks that `Network.stop()` leaves nothing
either.

Each trial prints where it was killed and how long `clean` waited for the run's
processes to be gone (run with ``-s`` to see them).
"""

from __future__ import annotations

import glob
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fidelnet.kernel import procwait
from fidelnet.kernel.state import STATE_DIR, live_objects

pytestmark = pytest.mark.privileged

SRC = str(Path(__file__).resolve().parents[2] / "src")
SEED = int(os.environ.get("FIDELNET_KILL_SEED", "40"))
PHASES = ("build", "traffic", "teardown")
TRIALS = 6

# Two pairs of hosts, each joined by an engine link (one linkd, four TAP devices):
# an iperf3 flow on each, one of them to a daemonized server (PID 1's child from its
# start), and a shell's background job (an orphan once its shell dies).
VICTIM = """
import subprocess, sys, time
sys.path.insert(0, {src!r})
from fidelnet import Network
from fidelnet.kernel.procfs import tcp_listening
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

def mark(phase):
    print(phase, flush=True)

spec = TopologySpec()
for name, ip in (("h1", "10.0.0.1"), ("h2", "10.0.0.2"), ("h3", "10.0.1.3"), ("h4", "10.0.1.4")):
    spec.add_node(NodeSpec(name, ip=ip + "/24"))
for a, b in (("h1", "h2"), ("h3", "h4")):
    shaped = LinkParams(delay=0.001, bw=200e6)
    link = LinkSpec(a, b, params_ab=shaped, params_ba=shaped)
    link.backend = "engine"
    spec.add_link(link)
quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
mark("build")
net = Network(spec, run_id=sys.argv[1]).start()
assert [l.backend for l in net.links] == ["engine", "engine"]
h1, h2, h3, h4 = (net[n] for n in ("h1", "h2", "h3", "h4"))
h1.cmd("sleep 1000 &")
h4.cmd("iperf3 -s -D -p 5202")
server = h2.popen(["iperf3", "-s", "-p", "5201"], **quiet)
while not tcp_listening(server.pid, 5201) or not h4.cmd("ss -Hltn sport = :5202").strip():
    time.sleep(0.01)
mark("traffic")
flows = [
    h1.popen(["iperf3", "-c", "10.0.0.2", "-p", "5201", "-t", "2"], **quiet),
    h3.popen(["iperf3", "-c", "10.0.1.4", "-p", "5202", "-t", "2"], **quiet),
]
codes = [f.wait() for f in flows]
mark("teardown " + " ".join(map(str, codes)))
net.stop()
mark("done")
time.sleep(300)
"""


@dataclass
class Run:
    """One run of the victim, watched."""

    run_id: str
    proc: subprocess.Popen[str]
    marks: list[tuple[str, float]] = field(default_factory=list)
    seen: dict[tuple[int, int], str] = field(default_factory=dict)  # descendants: comm
    netns: set[tuple[int, int]] = field(default_factory=set)  # (st_dev, st_ino)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)
    threads: list[threading.Thread] = field(default_factory=list)

    def sample(self) -> None:
        """Every descendant of the owner now, and the run's namespaces."""
        stats = [s for s in map(procwait.read_stat, _pids()) if s is not None]
        kids: dict[int, list[procwait.ProcStat]] = {}
        for st in stats:
            kids.setdefault(st.ppid, []).append(st)
        todo = [self.proc.pid]
        found = []
        while todo:
            for st in kids.get(todo.pop(), []):
                found.append(st)
                todo.append(st.pid)
        inodes = set()
        for name in _run_netns(self.run_id):
            try:
                st_ns = os.stat(os.path.join("/run/netns", name))
            except OSError:
                continue
            inodes.add((st_ns.st_dev, st_ns.st_ino))
        with self.lock:
            for st in found:
                self.seen[(st.pid, st.start)] = st.comm
            self.netns |= inodes

    def watch(self) -> None:
        while not self.stop.wait(0.02):
            self.sample()

    def read_marks(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.marks.append((line.strip(), time.monotonic()))
                self.changed.notify_all()

    def wait_mark(self, phase: str, timeout: float = 90.0) -> float:
        """When the victim reached ``phase``."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for mark, at in self.marks:
                    if mark.split()[0] == phase:
                        return at
                assert self.proc.poll() is None, f"the run exited early: {self.marks}"
                left = deadline - time.monotonic()
                assert left > 0, f"no {phase!r} from the run within {timeout:.0f} s"
                self.changed.wait(left)

    def reached(self) -> str:
        with self.changed:
            return self.marks[-1][0].split()[0] if self.marks else "start"


def _pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def _run_netns(run_id: str) -> list[str]:
    try:
        return [n for n in os.listdir("/run/netns") if n.startswith(f"fn{run_id}")]
    except FileNotFoundError:
        return []


def _in_run_cgroup(pid: int, run_id: str) -> bool:
    cg = procwait.cgroup_path(pid)
    top = f"/fidelnet-{run_id}"
    return cg is not None and (cg == top or cg.startswith(top + "/"))


def _start(run_id: str) -> Run:
    run = Run(
        run_id,
        subprocess.Popen(
            [sys.executable, "-c", VICTIM.format(src=SRC), run_id],
            stdout=subprocess.PIPE,
            text=True,
        ),
    )
    run.threads = [
        threading.Thread(target=run.read_marks, daemon=True),
        threading.Thread(target=run.watch, daemon=True),
    ]
    for t in run.threads:
        t.start()
    return run


def _end(run: Run) -> None:
    run.stop.set()
    if run.proc.poll() is None:
        run.proc.kill()
    run.proc.wait()
    for t in run.threads:  # the reader ends at end of file: the owner is gone
        t.join(timeout=30)
    if run.proc.stdout is not None:
        run.proc.stdout.close()


def _known(run: Run) -> dict[tuple[int, int], str]:
    """The processes `clean` can know: recorded in the run's state, or in its cgroups."""
    out: dict[tuple[int, int], str] = {}
    path = os.path.join(STATE_DIR, f"{run.run_id}.jsonl")
    if os.path.exists(path):
        for rec in live_objects(path):
            if rec["kind"] == "process":
                out[(int(rec["pid"]), int(rec["start"]))] = str(rec.get("what", "recorded"))
    for pid in _pids():
        st = procwait.read_stat(pid)
        if st is not None and _in_run_cgroup(pid, run.run_id):
            out[(pid, st.start)] = st.comm
    return out


def leftovers(run: Run, known: dict[tuple[int, int], str]) -> tuple[list[str], list[str]]:
    """What of the run still exists: (left behind, unrecorded zombies). A process the
    run started in the instant between its fork and its record is unknown to
    `clean`; it ends on its own (parent-death signal, end of file on its pipe or
    terminal), so it may only be a zombie not yet reaped."""
    rid = run.run_id
    left: list[str] = []
    for (pid, start), what in known.items():
        st = procwait.read_stat(pid)
        if st is not None and st.start == start:
            left.append(f"process {pid} ({st.comm}, {what}): state {st.state}, parent {st.ppid}")
    unrecorded: list[str] = []
    with run.lock:
        seen = dict(run.seen)
        inodes = set(run.netns)
    for (pid, start), comm in seen.items():
        st = procwait.read_stat(pid)
        if (pid, start) in known or st is None or st.start != start:
            continue
        entry = f"process {pid} ({comm}): state {st.state}, parent {st.ppid}"
        (unrecorded if st.zombie else left).append(entry)
    for pid in _pids():
        if _in_run_cgroup(pid, rid):
            left.append(f"process {pid} in a cgroup of the run")
        try:
            st_ns = os.stat(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        if (st_ns.st_dev, st_ns.st_ino) in inodes:
            left.append(f"process {pid} in a namespace of the run")
    left += [f"netns {n}" for n in _run_netns(rid)]
    left += [f"cgroup {d}" for d in glob.glob(f"/sys/fs/cgroup/*/fidelnet-{rid}")]
    left += [f"cgroup {d}" for d in glob.glob(f"/sys/fs/cgroup/fidelnet-{rid}")]
    left += [f"state file {f}" for f in glob.glob(os.path.join(STATE_DIR, f"{rid}*"))]
    links = subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
    ).stdout
    left += [
        f"interface {line.split(': ')[1]}"
        for line in links.splitlines()
        if f"fidelnet:{rid}" in line
    ]
    return left, unrecorded


def _clean() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fidelnet", "clean"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )


def _run_id(rng: random.Random) -> str:
    while True:
        rid = f"{rng.getrandbits(24):06x}"
        if not os.path.exists(os.path.join(STATE_DIR, f"{rid}.jsonl")):
            return rid


def test_clean_after_a_kill_at_a_random_moment_leaves_nothing_of_the_run() -> None:
    rng = random.Random(SEED)
    print(f"\nseed {SEED} (FIDELNET_KILL_SEED)")

    # Calibration: a whole run, to time its phases; its stop() must leave nothing.
    run = _start(_run_id(rng))
    try:
        began = {p: run.wait_mark(p) for p in (*PHASES, "done")}
        run.sample()
        left, unrecorded = leftovers(run, {})
        codes = next(m for m, _ in run.marks if m.startswith("teardown")).split()[1:]
    finally:
        _end(run)
    assert codes == ["0", "0"], f"iperf3 flows failed: exit codes {codes}"
    assert left + unrecorded == [], f"after Network.stop(): {left + unrecorded}"
    span = {p: began[n] - began[p] for p, n in zip(PHASES, (*PHASES[1:], "done"), strict=True)}
    print("phases: " + ", ".join(f"{p} {s:.2f} s" for p, s in span.items()))

    phases = list(PHASES) * (TRIALS // len(PHASES))
    rng.shuffle(phases)
    failures = []
    for i, phase in enumerate(phases):
        run = _start(_run_id(rng))
        try:
            run.wait_mark(phase)
            delay = rng.uniform(0.0, span[phase])
            time.sleep(delay)
            run.sample()  # the last look at the owner's descendants
            run.proc.send_signal(signal.SIGKILL)
            run.proc.wait()
            run.stop.set()
            known = _known(run)
            began_clean = time.monotonic()
            res = _clean()
            left, unrecorded = leftovers(run, known)  # at once: nothing may be left
            took = time.monotonic() - began_clean
        finally:
            _end(run)
        m = re.search(
            rf"run {run.run_id}: (\d+) processes ended, gone after ([\d.]+) s", res.stdout
        )
        waited = f"{m.group(1)} processes gone after {m.group(2)} s" if m else "no process to end"
        print(
            f"trial {i + 1}: killed in {phase} +{delay:.2f} s (reached {run.reached()}); "
            f"clean took {took:.2f} s, {waited}"
            + (f"; unrecorded zombies: {unrecorded}" if unrecorded else "")
        )
        # `clean` also removes other stale runs on the machine: only ours are judged.
        problems = [ln for ln in res.stderr.splitlines() if f"run {run.run_id}:" in ln]
        if res.returncode != 0 and not res.stderr.strip():
            problems.append(f"exit status {res.returncode}")
        if problems or left:
            failures.append(
                f"trial {i + 1} ({phase} +{delay:.2f} s, seed {SEED}): problems {problems}, "
                f"left {left}; clean said: {res.stdout.strip()} {res.stderr.strip()}"
            )
    assert failures == [], "\n".join(failures)
