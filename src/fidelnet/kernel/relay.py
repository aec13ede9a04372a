"""A TCP relay between two network namespaces: how OVS switches in a run's fabric
reach an OpenFlow controller that listens elsewhere (docs/decisions/ovs-controllers.md).

:class:`Relay` listens on ``127.0.0.1:PORT`` inside one namespace (the fabric, where
``ovs-vswitchd`` runs) and, for each connection accepted there, opens a connection
to ``ip:port`` from another namespace (the host's, or a node's), then copies bytes
both ways. It is one thread of the calling process: ``setns`` changes only the
calling thread's namespace, and a socket stays in the namespace it was created in,
so the thread opens each socket inside the namespace it belongs to and serves them
all from one ``selectors`` loop. It creates no kernel object that outlives the
process: its sockets close with it.

A connection the controller refuses is closed on the switch's side at once; the
switch retries with its own back-off, as it would with an unreachable controller.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
import threading
from dataclasses import dataclass, field

from fidelnet.errors import KernelError
from fidelnet.kernel import ns

__all__ = ["Relay"]

log = logging.getLogger("fidelnet")

CHUNK = 65536
MAX_BUFFER = 4 * 1024 * 1024  # per direction; a side that does not read stops the other


@dataclass
class _Pipe:
    """One relayed connection: the switch's side and the controller's."""

    switch: socket.socket
    controller: socket.socket
    connected: bool = False
    to_controller: bytearray = field(default_factory=bytearray)
    to_switch: bytearray = field(default_factory=bytearray)
    switch_eof: bool = False
    controller_eof: bool = False
    shut_controller: bool = False  # its writing side shut (the switch's half-close)
    shut_switch: bool = False


class Relay:
    """Listen on ``127.0.0.1:listen_port`` in namespace ``listen_ns`` (a path), relay
    each connection to ``ip:port`` opened from namespace ``target_ns`` (a path; None:
    this process's own). ``listen_port`` 0 picks a free port (:attr:`port` after
    :meth:`start`)."""

    def __init__(
        self,
        listen_ns: str | None,
        listen_port: int,
        target_ns: str | None,
        ip: str,
        port: int,
        name: str = "relay",
    ) -> None:
        self.listen_ns = listen_ns
        self.port = listen_port
        self.target_ns = target_ns
        self.ip = ip
        self.target_port = port
        self.name = name
        self.accepted = 0
        self.refused = 0
        self._sel = selectors.DefaultSelector()
        self._pipes: dict[socket.socket, _Pipe] = {}
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _socket_in(self, path: str | None, family: int) -> socket.socket:
        if path is None:
            return socket.socket(family, socket.SOCK_STREAM)
        with ns.entered(path):
            return socket.socket(family, socket.SOCK_STREAM)

    def start(self) -> None:
        """Open the listening socket (errors raise here, in the caller) and start
        the thread."""
        lst = self._socket_in(self.listen_ns, socket.AF_INET)
        try:
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lst.bind(("127.0.0.1", self.port))
            lst.listen(16)
        except OSError as exc:
            lst.close()
            self._sel.close()
            self._wake_r.close()
            self._wake_w.close()
            raise KernelError(
                f"{self.name}: cannot listen on 127.0.0.1:{self.port} in the run's "
                f"fabric: {exc.strerror or exc}"
            ) from exc
        lst.setblocking(False)
        self.port = lst.getsockname()[1]
        self._listener = lst
        self._sel.register(lst, selectors.EVENT_READ, "accept")
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(
            target=self._loop, name=f"fidelnet-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close every socket."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        for pipe in list(self._pipes.values()):
            self._close(pipe)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(self._wake_r)
        if self._listener is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(self._listener)
            self._listener.close()
            self._listener = None
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    @property
    def connections(self) -> int:
        """Connections being relayed now."""
        return len({id(p) for p in self._pipes.values()})

    # -- the loop ----------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, events in self._sel.select(1.0):
                what = key.data
                if what == "wake":
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(64)
                elif what == "accept":
                    self._accept()
                elif isinstance(key.fileobj, socket.socket):
                    pipe = self._pipes.get(key.fileobj)
                    if pipe is None:
                        continue
                    try:
                        self._serve(pipe, key.fileobj, events)
                    except Exception:  # one connection's fault never stops the relay
                        log.warning("%s: a relayed connection failed", self.name, exc_info=True)
                        self._close(pipe)

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        conn.setblocking(False)
        family = socket.AF_INET6 if ":" in self.ip else socket.AF_INET
        try:
            out = self._socket_in(self.target_ns, family)
        except (OSError, KernelError):
            conn.close()
            self.refused += 1
            return
        out.setblocking(False)
        err = out.connect_ex((self.ip, self.target_port))
        if err not in (0, errno.EINPROGRESS):
            out.close()
            conn.close()
            self.refused += 1
            return
        self.accepted += 1
        pipe = _Pipe(conn, out, connected=err == 0)
        self._pipes[conn] = pipe
        self._pipes[out] = pipe
        self._rearm(pipe)

    def _serve(self, pipe: _Pipe, sock: socket.socket, events: int) -> None:
        if sock is pipe.controller and not pipe.connected:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self.refused += 1
                self._close(pipe)
                return
            pipe.connected = True
            self._rearm(pipe)
            return
        peer_buf, own_eof_attr = (
            (pipe.to_controller, "switch_eof")
            if sock is pipe.switch
            else (pipe.to_switch, "controller_eof")
        )
        if events & selectors.EVENT_READ:
            try:
                data = sock.recv(CHUNK)
            except BlockingIOError:
                data = None
            except OSError:
                self._close(pipe)
                return
            if data == b"":
                setattr(pipe, own_eof_attr, True)
            elif data:
                peer_buf += data
        if events & selectors.EVENT_WRITE:
            buf = pipe.to_switch if sock is pipe.switch else pipe.to_controller
            try:
                sent = sock.send(buf)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._close(pipe)
                return
            del buf[:sent]
        # A side that ended its sending ends the other's once its bytes are through
        # (a half-close passed on); both ended and drained: the pipe is done.
        for eof, drained, other, attr in (
            (pipe.switch_eof, not pipe.to_controller, pipe.controller, "shut_controller"),
            (pipe.controller_eof, not pipe.to_switch, pipe.switch, "shut_switch"),
        ):
            if eof and drained and not getattr(pipe, attr):
                setattr(pipe, attr, True)
                with contextlib.suppress(OSError):
                    other.shutdown(socket.SHUT_WR)
        if pipe.shut_controller and pipe.shut_switch:
            self._close(pipe)
            return
        self._rearm(pipe)

    def _rearm(self, pipe: _Pipe) -> None:
        """(Re)register both sockets for what they can do now; a socket with
        nothing to do is unregistered, so an idle full buffer does not spin."""
        for sock, inbox, outbox, eof in (
            (pipe.switch, pipe.to_controller, pipe.to_switch, pipe.switch_eof),
            (pipe.controller, pipe.to_switch, pipe.to_controller, pipe.controller_eof),
        ):
            events = 0
            if pipe.connected and not eof and len(inbox) < MAX_BUFFER:
                events |= selectors.EVENT_READ
            if outbox or (sock is pipe.controller and not pipe.connected):
                events |= selectors.EVENT_WRITE
            try:
                registered = self._sel.get_key(sock) is not None
            except KeyError:
                registered = False
            if events and registered:
                self._sel.modify(sock, events)
            elif events:
                self._sel.register(sock, events)
            elif registered:
                self._sel.unregister(sock)

    def _close(self, pipe: _Pipe) -> None:
        for sock in (pipe.switch, pipe.controller):
            self._pipes.pop(sock, None)
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)
            sock.close()
