"""The two ways frames travel between the docker backend and a container's supervisor.

`AttachStream`: the container's hijacked attach connection, through the engine; what we send is
the supervisor's stdin, and what comes back is its stdout behind Docker's 8-byte stream headers.
`SupervisorSocket`: a Unix socket in a directory of ours bind-mounted into the container; the
supervisor connects and presents a token, after which the socket and directory are removed.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import select
import shutil
import socket
import struct
import tempfile
import time
from typing import Any

from sandboxes.api import SandboxError, SandboxUnavailable
from sandboxes.frames import FrameBuffer

__all__ = ["AttachStream", "SocketUnusable", "SupervisorSocket"]

_STDOUT = 1
_SEND_TIMEOUT_S = 30.0


class SocketUnusable(SandboxUnavailable):
    """The `socket` transport does not work here (see `SandboxSettings.docker_transport`)."""


class AttachStream:
    """The attach connection: `send` writes the supervisor's stdin, `recv` returns its stdout
    with Docker's stream headers removed (its stderr, not ours to read, is dropped)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw  # the SocketIO wrapper docker-py returns holds a reference on the socket
        self.sock: socket.socket = getattr(raw, "_sock", raw)
        self._pending = bytearray()  # bytes received, not yet demultiplexed
        self._left = 0  # payload bytes still due in the current stdout/stderr chunk
        self._stream = _STDOUT

    def send(self, data: bytes) -> None:
        self.sock.settimeout(_SEND_TIMEOUT_S)
        self.sock.sendall(data)

    def _take(self) -> bytes:
        """The stdout payload in what was received so far."""
        out = bytearray()
        while self._pending:
            if self._left == 0:
                if len(self._pending) < 8:
                    break
                self._stream = self._pending[0]
                self._left = struct.unpack(">I", self._pending[4:8])[0]
                del self._pending[:8]
                continue
            take = min(self._left, len(self._pending))
            if self._stream == _STDOUT:
                out += self._pending[:take]
            del self._pending[:take]
            self._left -= take
        return bytes(out)

    def recv(self, timeout: float) -> bytes:
        """The next stdout bytes; b"" at the end of the stream; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            out = self._take()
            if out:
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                raise
            except OSError:
                return b""
            if not data:
                return b""
            self._pending += data

    def close(self) -> None:
        for stream in (self.raw, self.sock):
            with contextlib.suppress(OSError):  # a connection the engine dropped already
                stream.close()


class SupervisorSocket:
    """A listening Unix socket only the container's uid (and root) may connect to, in a
    directory of ours that uid cannot write; `accept` takes the supervisor's connection."""

    def __init__(self, socket_dir: str, uid: int, token: str) -> None:
        self._token = token
        self._conn: socket.socket | None = None
        self._pending = bytearray()  # frames that came in with the token
        self.directory: str | None = tempfile.mkdtemp(prefix="c-", dir=socket_dir)
        os.chmod(self.directory, 0o755)
        path = os.path.join(self.directory, "s")
        self._listener: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(path)
            if os.geteuid() == 0:
                os.chown(path, uid, uid)
                os.chmod(path, 0o600)
            else:
                os.chmod(path, 0o666)  # the token still decides who is let in
            self._listener.listen(4)
        except OSError as exc:  # e.g. a path longer than a Unix socket's 107 bytes
            self.stop_listening()
            raise SocketUnusable(f"cannot listen at {path}: {exc}") from exc

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def accept(self, attach: AttachStream, timeout: float) -> None:
        """After the bootstrap: take the supervisor's connection (the one presenting our token),
        then remove the socket and its directory, so nothing else can ever connect. Anything on
        the attach stream meanwhile is the supervisor saying it could not connect."""
        deadline = time.monotonic() + timeout
        listener = self._listener
        assert listener is not None, "accept() once, right after the bootstrap"
        try:
            while self._conn is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SocketUnusable("the supervisor did not connect to its socket")
                ready, _, _ = select.select([listener, attach.sock], [], [], left)
                if attach.sock in ready:  # this host's engine does not see our directory
                    message = attach.recv(max(0.1, deadline - time.monotonic()))
                    raise SocketUnusable(
                        f"the supervisor could not use its socket: {message[:300]!r}"
                    )
                if listener in ready:
                    conn, _ = listener.accept()
                    if self._check_token(conn, deadline):
                        self._conn = conn
                    else:
                        conn.close()
        finally:
            self.stop_listening()

    def _check_token(self, conn: socket.socket, deadline: float) -> bool:
        frames = FrameBuffer()
        conn.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            while (frame := frames.next()) is None:
                data = conn.recv(4096)
                if not data:
                    return False
                frames.feed(data)
        except (OSError, ValueError, SandboxError):
            return False
        token = frame.get("token")
        ok = (
            frame.get("kind") == "token"
            and isinstance(token, str)
            and hmac.compare_digest(token, self._token)
        )
        if ok:
            self._pending += frames.rest()  # the ready frame may have come with the token
        return ok

    def send(self, data: bytes) -> None:
        assert self._conn is not None
        self._conn.settimeout(_SEND_TIMEOUT_S)
        self._conn.sendall(data)

    def recv(self, timeout: float) -> bytes:
        """The next supervisor bytes; b"" at the end of the stream; raises TimeoutError."""
        assert self._conn is not None
        if self._pending:
            data = bytes(self._pending)
            self._pending.clear()
            return data
        self._conn.settimeout(timeout)
        try:
            return self._conn.recv(1 << 20)
        except TimeoutError:
            raise
        except OSError:
            return b""

    def stop_listening(self) -> None:
        """Close the listener and remove its directory (also while the container mounts it:
        the mount keeps an empty, read-only directory)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def close(self) -> None:
        self.stop_listening()
        if self._conn is not None:
            self._conn.close()
