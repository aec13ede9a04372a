"""The link engine client against a fake daemon speaking linkd's protocol: start,
requests, refusals, a crash detected and reported, shutdown."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fidelnet.links.engine import LinkEngine, LinkEngineError

FAKE = r"""
import json, os, socket, sys
args = sys.argv[1:]
path = args[args.index("--control") + 1]
threads = int(args[args.index("--threads") + 1]) if "--threads" in args else 1
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
os.chmod(path, 0o600)
srv.listen(4)
links = {}
conn, _ = srv.accept()
f = conn.makefile("rwb")
for line in f:
    req = json.loads(line)
    op = req["op"]
    if op == "crash":
        sys.stderr.write("fake linkd: segfault simulated\n"); sys.stderr.flush()
        os._exit(139)
    if op == "hello":
        rep = {"ok": True, "pid": os.getpid(), "endpoint": "tap", "threads": threads}
    elif op == "add_link":
        if req["link"] in links:
            rep = {"ok": False, "error": "link exists"}
        else:
            links[req["link"]] = req
            rep = {"ok": True}
    elif op == "stats":
        rep = {"ok": True, "links": {k: {"up": True} for k in links}}
    elif op == "shutdown":
        f.write(b'{"ok":true}\n'); f.flush(); os.unlink(path); sys.exit(0)
    else:
        rep = {"ok": False, "error": "unknown op " + op}
    rep["id"] = req.get("id")
    f.write(json.dumps(rep).encode() + b"\n"); f.flush()
"""


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    fake = tmp_path / "fake-linkd"
    fake.write_text(f"#!{sys.executable}\n{FAKE}")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FIDELNET_LINKD", str(fake))
    records: list[tuple[str, dict[str, Any]]] = []
    eng = LinkEngine(
        "abc123", None, lambda kind, **f: records.append((kind, f)), state_dir=str(tmp_path)
    )
    eng.start()
    eng.records = records
    yield eng
    eng.stop()


def test_start_records_what_it_owns(engine: LinkEngine) -> None:
    kinds = [k for k, _ in engine.records]  # type: ignore[attr-defined]
    assert kinds == ["file", "file", "process"]
    assert engine.alive()
    assert stat.S_IMODE(os.stat(engine.socket_path).st_mode) == 0o600


def test_requests_and_refusals(engine: LinkEngine) -> None:
    engine.add_link("h1:h1-eth0", ("/a", "h1-eth0"), ("/b", "s1-eth1"), {}, {})
    assert engine.stats() == {"h1:h1-eth0": {"up": True}}
    with pytest.raises(LinkEngineError, match="link exists"):
        engine.add_link("h1:h1-eth0", ("/a", "h1-eth0"), ("/b", "s1-eth1"), {}, {})


def test_crash_is_detected_and_reported(engine: LinkEngine) -> None:
    with pytest.raises(LinkEngineError) as info:
        engine.request("crash")
    deadline = time.monotonic() + 5
    while engine.failure is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.failure is not None
    assert "died unexpectedly" in engine.failure and "exit status 139" in engine.failure
    assert "segfault simulated" in engine.failure
    assert "exit" in str(info.value) or "closed" in str(info.value)
    with pytest.raises(LinkEngineError, match="died unexpectedly"):
        engine.stats()
    assert engine.stop() == engine.failure


def test_shutdown_removes_socket_and_log(engine: LinkEngine) -> None:
    assert engine.stop() is None
    assert not os.path.exists(engine.socket_path)
    assert not os.path.exists(engine.log_path)
    assert engine.proc is not None and engine.proc.returncode == 0


def test_linkd_options_come_from_the_network_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fidelnet.network import Network

    monkeypatch.setenv("FIDELNET_LINKD_ARGS", "--spin-us 50 --batch '32'")
    assert Network().engine_args == ["--spin-us", "50", "--batch", "32"]
    assert Network(engine_args=["--spin-us", "0"]).engine_args == ["--spin-us", "0"]


@pytest.mark.parametrize(
    ("threads", "extra", "loops"),
    [
        (1, [], "1 engine loop"),
        (3, [], "3 engine loops"),
        (3, ["--threads", "2"], "2 engine loops"),
    ],
)
def test_engine_threads_reach_linkd_and_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int, extra: list[str], loops: str
) -> None:
    fake = tmp_path / "fake-linkd"
    fake.write_text(f"#!{sys.executable}\n{FAKE}")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FIDELNET_LINKD", str(fake))
    eng = LinkEngine(
        "thr1",
        None,
        lambda kind, **f: None,
        state_dir=str(tmp_path),
        threads=threads,
        extra_args=extra,
        realtime_priority=0,
        spin_us=0,
    )
    eng.start()
    try:
        # What linkd said it runs (the fake echoes --threads), not what was asked.
        assert eng.release.endswith("; " + loops)
    finally:
        eng.stop()
