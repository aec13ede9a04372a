"""Events on a running network, and the outage each one causes told from the packets:
an engine link flapped for 2 s under 10 kpps, a switch port taken down for good,
bad events refused before anything happens."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from _precision import precise
from fidelnet import Network
from fidelnet.errors import ValidationError
from fidelnet.events import Condition, Event, Timeline
from fidelnet.measure.packets import udp
from fidelnet.measure.results import EventRecord
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged

RATE = 10_000
GAP_S = 1 / RATE


def _spec(engine: bool) -> TopologySpec:
    """h1 - s1 - h2; the s1-h2 link on the engine when asked."""
    t = TopologySpec()
    t.ipv6 = False
    t.add_node(NodeSpec("s1", kind="switch"))
    t.add_node(NodeSpec("h1"))
    t.add_node(NodeSpec("h2"))
    t.add_link(LinkSpec("h1", "s1"))
    t.add_link(LinkSpec("s1", "h2", backend="engine" if engine else None))
    return t


def _flap() -> tuple[EventRecord, EventRecord]:
    """One 2 s flap of an engine link under 10 kpps, with what must hold on every
    run, however busy the machine (the precision of the outage is judged apart)."""
    with Network(_spec(engine=True)) as net:
        flap = Event(at=1.0, action="flap", link=("s1", "h2"), duration=2.0, name="cut")
        res = udp(net, "h1", "h2", RATE, duration=4.0, events=[flap], monitor=False)
    down, up = res.events
    assert (down.name, down.action, up.action) == ("cut:down", "down", "up")
    assert down.error is None and up.error is None
    assert down.at_s == pytest.approx(1.0) and up.at_s == pytest.approx(3.0)
    # The engine was told ahead and cut and restored the path at the planned
    # instants themselves: the truth is exactly 2 s.
    assert down.exact and up.exact
    assert down.effective_s is not None and up.effective_s is not None
    assert up.effective_s - down.effective_s == pytest.approx(2.0, abs=1e-6)
    assert down.outage_s is not None and down.recovered and down.lost is not None
    # The outage is told from send times: to one packet interval, and a sender
    # behind its schedule at either end moves that end by as much.
    behind_s = res.behind_max_ns / 1e9
    assert abs(down.outage_s - 2.0) <= GAP_S + behind_s + 1e-6, (down.outage_s, behind_s)
    # Packets due in the cut were lost; a sender that fell behind its schedule
    # (a busy machine) sent some due before it inside it, or some due inside it
    # after: by at most the span it was behind.
    assert abs(down.lost - 2.0 * RATE) <= 1 + behind_s * RATE, (down.lost, behind_s)
    assert len(res.outages) == 1 and res.outages[0].lost == down.lost
    assert res.lost == down.lost  # nothing else was lost
    return down, up


def test_an_engine_link_flap_is_measured_to_one_packet_interval() -> None:
    # The outage told from the packets: 2 s to 0.1 ms (issue 15's target; how close
    # run after run is bench/events_precision.py: within 5 us), and the timeline
    # thread on time to 5 ms: precision claims (tests/_precision.py).
    def miss(got: tuple[EventRecord, EventRecord]) -> str | None:
        down, up = got
        assert down.outage_s is not None
        if abs(down.outage_s - 2.0) > GAP_S:
            return f"outage {down.outage_s:.7f} s, not 2 s to {GAP_S * 1e3:g} ms"
        if not (0 <= down.late_s < 0.005 and 0 <= up.late_s < 0.005):
            return f"events applied {down.late_s * 1e3:.2f} / {up.late_s * 1e3:.2f} ms late"
        return None

    precise(_flap, miss)


def _down_for_good() -> EventRecord:
    with Network(_spec(engine=False)) as net:
        cut = Event(at=0.5, action="down", link=("h2", "s1"))
        res = udp(net, "h1", "h2", RATE, duration=1.5, events=[cut], monitor=False)
    (ev,) = res.events
    assert ev.error is None and ev.recovered is False
    assert ev.outage_s is not None and ev.lost is not None
    return ev


def test_a_link_that_stays_down_is_an_outage_that_did_not_recover() -> None:
    # Not the engine: the link is taken down by netlink from the timeline thread,
    # when it wakes up; to 10 ms and 20 packets (a precision claim).
    def miss(ev: EventRecord) -> str | None:
        assert ev.outage_s is not None and ev.lost is not None
        if abs(ev.outage_s - 1.0) >= 0.01 or abs(ev.lost - RATE) > 20:
            return f"outage {ev.outage_s:.4f} s with {ev.lost} lost, not 1 s and {RATE}"
        return None

    precise(_down_for_good, miss)


def test_bad_events_are_refused_before_anything_happens() -> None:
    with Network(_spec(engine=False)) as net:
        with pytest.raises(ValidationError, match="no link between") as err:
            Timeline(net, [Event(at=1.0, action="down", link=("h1", "h2"))])
        assert "h1-s1" in str(err.value)  # the links there are
        with pytest.raises(ValidationError, match="unknown node"):
            Timeline(net, [Event(at=1.0, action="node_down", node="h9")])
        with pytest.raises(ValidationError, match="duration"):
            Timeline(net, [Event(at=1.0, action="flap", link=("h1", "s1"))])
        with pytest.raises(ValidationError, match="after the traffic"):
            udp(net, "h1", "h2", 1000, duration=1.0, events=[Event(at=2.0, action="down",
                link=("h1", "s1"))], monitor=False)  # fmt: skip
        assert all(i.is_up() for n in net.nodes.values() for i in n.intf_list())


def test_an_event_after_a_condition_signals_a_process_of_the_node(tmp_path: Path) -> None:
    pidfile, go = tmp_path / "app.pid", tmp_path / "go"
    with Network(_spec(engine=False)) as net:
        app = net["h2"].popen(["sh", "-c", f'echo $$ > "{pidfile}"; exec sleep 60'])
        outsider = subprocess.Popen(["sleep", "60"])  # in the host namespace
        (tmp_path / "outsider.pid").write_text(f"{outsider.pid}\n")
        try:
            wait_for = Condition(node="h1", argv=("test", "-e", str(go)), wait=5.0,
                                 interval=0.05)  # fmt: skip
            events = [
                Event(at=0.2, action="signal", node="h2", pidfile=str(pidfile),
                      after=wait_for, name="stop-app"),
                Event(at=0.1, action="signal", node="h2",
                      pidfile=str(tmp_path / "outsider.pid"), name="not-ours"),
                Event(at=0.1, action="run", node="h1", argv=("true",), name="never",
                      after=Condition(node="h1", argv=("false",), wait=0.3, interval=0.05)),
            ]  # fmt: skip
            tl = Timeline(net, events).start()
            threading.Timer(0.5, go.touch).start()
            done = {h.name: h for h in tl.wait(timeout=10)}
            stop = done["stop-app"]
            assert stop.error is None and stop.output.startswith("SIGTERM sent to")
            held = (stop.condition_ns - (tl.t0_ns or 0)) / 1e9
            assert 0.45 <= held < 1.0
            assert abs((stop.started_ns - stop.condition_ns) / 1e9 - 0.2) < 0.005
            assert app.wait(timeout=5) == -signal.SIGTERM
            assert "does not live in h2" in (done["not-ours"].error or "")
            assert outsider.poll() is None  # untouched
            assert "did not hold within 0.3 s" in (done["never"].error or "")
        finally:
            outsider.kill()
            outsider.wait()


def test_a_restart_stops_the_process_and_starts_it_again(tmp_path: Path) -> None:
    pidfile, stubborn_pid = tmp_path / "app.pid", tmp_path / "stubborn.pid"
    start = ["sh", "-c", 'sleep 60 >/dev/null 2>&1 & echo $! > "$1"', "sh", str(pidfile)]
    with Network(_spec(engine=False)) as net:
        h2 = net["h2"]
        first = h2.popen(["sh", "-c", f'echo $$ > "{pidfile}"; exec sleep 60'])
        stubborn = h2.popen(
            ["sh", "-c", f'trap "" TERM; echo $$ > "{stubborn_pid}"; while :; do sleep 0.05; done']
        )
        started: list[int] = []
        try:
            for f in (pidfile, stubborn_pid):
                deadline = time.monotonic() + 5
                while not f.exists() or not f.read_text().strip():
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
            events = [
                Event(at=0.1, action="restart", node="h2", pidfile=str(pidfile),
                      argv=tuple(start), name="restart-app"),
                Event(at=0.1, action="restart", node="h2", pidfile=str(stubborn_pid),
                      argv=("true",), timeout=0.3, name="restart-stubborn"),
            ]  # fmt: skip
            done = {h.name: h for h in Timeline(net, events).start().wait(timeout=10)}
            app = done["restart-app"]
            assert app.error is None, app.error
            assert app.output.startswith(f"SIGTERM sent to {first.pid}, exited after")
            assert first.wait(timeout=5) == -signal.SIGTERM
            new = int(pidfile.read_text())
            started.append(new)
            assert new != first.pid and Path(f"/proc/{new}").exists()
            assert os.stat(f"/proc/{new}/ns/net").st_ino == os.stat(h2.netns or "").st_ino
            hard = done["restart-stubborn"]
            assert hard.error is None and "still running after 0.3 s: SIGKILL sent" in hard.output
            assert stubborn.wait(timeout=5) == -signal.SIGKILL
        finally:
            for pid in started:
                os.kill(pid, signal.SIGKILL)
            for p in (first, stubborn):
                if p.poll() is None:
                    p.kill()
