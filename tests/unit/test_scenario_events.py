"""Scenario events and outage checks: what validates, and each mistake named with
its place, before anything is built."""

from __future__ import annotations

import pytest

from fidelnet.scenario import ScenarioError, loads
from fidelnet.scenario.model import Pktgen

HEAD = """\
name: ev
topology:
  nodes: {s1: {kind: switch}, h1: {}, h2: {}}
  links: [{a: h1, b: s1}, {a: s1, b: h2}]
traffic:
  - name: load
    type: pktgen
    src: h1
    dst: h2
    rate: 1kpps
    duration: 4s
    events:
"""


def _problems(events: str, checks: str = "") -> list[str]:
    text = HEAD + events + (("checks:\n" + checks) if checks else "")
    with pytest.raises(ScenarioError) as info:
        loads(text, "ev.yaml")
    return [p.format() for p in info.value.problems]


def test_events_and_an_outage_check_validate() -> None:
    sc = loads(
        HEAD
        + "      - {name: cut, at: 1s, action: flap, link: [h2, s1], duration: 2s}\n"
        + "      - {at: 3500ms, action: node_down, node: h2}\n"
        + "checks:\n  - {type: outage, traffic: load, event: cut, max: 3s}\n",
        "ev.yaml",
    )
    item = sc.traffic[0]
    assert isinstance(item, Pktgen)
    events = [e.to_event() for e in item.events]
    assert events[0].duration == 2.0 and events[0].link == ("h2", "s1")
    assert events[1].key == "node_down-h2@3.5s"
    assert sc.checks[0].key == "outage-load-cut"


@pytest.mark.parametrize(
    ("events", "fragment"),
    [
        ("      - {at: 1s, action: down, link: [h1, h2]}\n",
         "ev.yaml:13:32: traffic[0].events[0].link: unknown link, did you mean 's1-h2'? "
         "(got 'h1-h2'; valid: h1-s1, s1-h2)"),
        ("      - {at: 1s, action: node_down, node: h9}\n",
         "ev.yaml:13:37: traffic[0].events[0].node: unknown node (got 'h9'; valid: s1, h1, h2)"),
        ("      - {at: 1s, action: flap, link: [h1, s1]}\n",
         "ev.yaml:13:9: traffic[0].events[0].duration: a flap, and only a flap, has a duration"),
        ("      - {at: 1s, action: down, node: h1}\n",
         "ev.yaml:13:9: traffic[0].events[0].link: a down event needs the link"),
        ("      - {at: 3s, action: flap, link: [h1, s1], duration: 2s}\n",
         "ev.yaml:13:48: traffic[0].events[0].duration: ends at 5 s, after the traffic's 4 s"),
        ("      - {at: 5s, action: down, link: [h1, s1]}\n",
         "ev.yaml:13:10: traffic[0].events[0].at: ends at 5 s, after the traffic's 4 s"),
        ("      - {at: 1s, action: down, link: [h1, s1]}\n"
         "      - {at: 2s, action: down, link: [s1, h1]}\n",
         "ev.yaml:14:18: traffic[0].events[1].action: the link is already down (events[0])"),
        ("      - {at: 1s, action: flap, link: [h1, s1], duration: 2s}\n"
         "      - {at: 2s, action: up, link: [h1, s1]}\n",
         "ev.yaml:14:18: traffic[0].events[1].action: the link is flapping until 3 s"),
        ("      - {at: 1s, action: up, link: [h1, s1]}\n",
         "ev.yaml:13:18: traffic[0].events[0].action: the link is already up"),
        ("      - {at: 1s, action: run, node: h1}\n",
         "ev.yaml:13:9: traffic[0].events[0].run: a run or restart, and only those, has a command"),
        ("      - {at: 1s, action: set, link: [h1, s1]}\n",
         "ev.yaml:13:9: traffic[0].events[0].params: a set, and only a set, has params"),
        ("      - {at: 1s, action: signal, node: h1, pidfile: run/x.pid}\n",
         "ev.yaml:13:44: traffic[0].events[0].pidfile: must be an absolute path"),
        ("      - {at: 1s, action: signal, node: h1}\n",
         "ev.yaml:13:9: traffic[0].events[0].pidfile: a signal or restart, and only those, "
         "has a pidfile"),
        ("      - {at: 1s, action: restart, node: h1, run: [bird]}\n",
         "ev.yaml:13:9: traffic[0].events[0].pidfile: a signal or restart, and only those, has"),
        ("      - {at: 1s, action: down, link: [h1, s1], after: {node: h1, run: [ip, a]}}\n",
         "ev.yaml:13:48: traffic[0].events[0].after.wait: a condition needs a deadline"),
        ("      - {at: 1s, action: down, link: [h1, s1], after: {check: up, node: h1}}\n",
         "ev.yaml:13:67: traffic[0].events[0].after.node: comes from check 'up': give one or "
         "the other (got 'h1')"),
        ("      - {at: 1s, action: down, link: [h1, s1],\n"
         "         after: {node: h7, run: [ip, a], wait: 5s}}\n",
         "ev.yaml:14:18: traffic[0].events[0].after.node: unknown node"),
    ],
)  # fmt: skip
def test_a_bad_event_is_named_with_its_place(events: str, fragment: str) -> None:
    found = _problems(events)
    assert len(found) == 1, found
    assert found[0].startswith(fragment), found[0]


def test_events_after_a_condition_are_not_ordered_with_the_others() -> None:
    sc = loads(
        HEAD
        + "      - {at: 1s, action: down, link: [h1, s1]}\n"
        + "      - {at: 500ms, action: down, link: [h1, s1],\n"
        + "         after: {node: h1, run: [ip, link], output: UP, wait: 10s}}\n"
        + "      - {at: 2s, action: signal, node: h2, pidfile: /run/x.pid, signal: STOP}\n",
        "ev.yaml",
    )
    item = sc.traffic[0]
    assert isinstance(item, Pktgen)
    cond = item.events[1].to_event().after
    assert cond is not None and cond.wait == 10.0 and cond.output == "UP"
    assert item.events[2].to_event().signal == "STOP"


def test_an_outage_check_needs_events_and_a_known_event() -> None:
    found = _problems(
        "      - {name: cut, at: 1s, action: down, link: [h1, s1]}\n",
        "  - {type: outage, traffic: load, event: cat}\n",
    )
    assert found == ["ev.yaml:15:35: checks[0].event: unknown event (got 'cat'; valid: cut)"]
    text = HEAD.replace("    events:\n", "") + "checks:\n  - {type: outage, traffic: load}\n"
    with pytest.raises(ScenarioError, match="'load' has no events to judge"):
        loads(text, "ev.yaml")


CHECKS = """\
  - {name: ospf-full, type: command, node: h1, run: [ip, link], output: UP, wait: 20s,
     interval: 100ms}
  - {name: no-wait, type: command, node: h2, run: ["true"]}
  - {type: loss, traffic: load, max: 100%}
"""


def test_an_event_waits_for_a_command_check_by_name() -> None:
    sc = loads(
        HEAD
        + "      - {at: 500ms, action: down, link: [h1, s1], after: {check: ospf-full}}\n"
        + "      - {at: 1s, action: restart, node: h2, pidfile: /run/b.pid, run: [bird],\n"
        + "         timeout: 3s, after: {check: no-wait, wait: 5s}}\n"
        + "checks:\n"
        + CHECKS,
        "ev.yaml",
    )
    item = sc.traffic[0]
    assert isinstance(item, Pktgen)
    cond = item.events[0].to_event().after
    assert cond is not None
    assert (cond.node, cond.argv, cond.output, cond.wait, cond.interval) == (
        "h1", ("ip", "link"), "UP", 20.0, 0.1
    )  # fmt: skip
    restart = item.events[1].to_event()
    assert restart.action == "restart" and restart.argv == ("bird",) and restart.timeout == 3.0
    assert restart.after is not None and restart.after.wait == 5.0
    assert restart.after.node == "h2"


@pytest.mark.parametrize(
    ("after", "fragment"),
    [
        ("{check: ospf-ful}",
         "traffic[0].events[0].after.check: unknown command check, did you mean 'ospf-full'?"),
        ("{check: loss-load}",
         "traffic[0].events[0].after.check: unknown command check (only command checks can be"),
        ("{check: no-wait}",
         "traffic[0].events[0].after.wait: check 'no-wait' has no wait"),
    ],
)  # fmt: skip
def test_an_event_after_a_check_names_what_is_wrong(after: str, fragment: str) -> None:
    found = _problems(f"      - {{at: 1s, action: down, link: [h1, s1], after: {after}}}\n", CHECKS)
    assert len(found) == 1, found
    assert fragment in found[0], found[0]
