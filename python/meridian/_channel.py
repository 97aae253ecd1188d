"""The trainer's end of a site's trainer channel: one JSON object per packet over a Unix socket of
packets in the site's run directory, and the shared segment's descriptor with the welcome. The daemon's
side and the protocol's messages are in daemon/attached/trainer_protocol.h."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any, Optional, Tuple

PROTOCOL_VERSION = 1
SOCKET_NAME = "trainer.sock"
_MAX_PACKET = 4 << 20


class SiteError(RuntimeError):
    """The site refused the trainer or ended the attachment; the message is the site's."""


class SiteLost(SiteError):
    """The channel closed under the trainer: the site stopped or its daemon died."""


class StepRefused(ValueError):
    """The site refused one step (NaN or Inf gradients); the run goes on. Skip the batch and go on."""


class Channel:
    """A connected trainer channel. Not thread-safe: the training loop's thread uses it."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        deadline = time.monotonic() + timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError) as e:
                sock.close()
                if time.monotonic() >= deadline:
                    raise SiteError(
                        f"no Meridian site listens on {path} (start it with `meridian start --trainer attached` "
                        f"and point MERIDIAN_RUN_DIR at its run directory)"
                    ) from e
                time.sleep(0.1)
        self._sock = sock

    def send(self, message: dict) -> None:
        try:
            self._sock.send(json.dumps(message).encode())
        except OSError as e:
            raise SiteLost(f"the site closed the trainer channel ({e})") from e

    def receive(self, with_fd: bool = False) -> Tuple[dict, Optional[int]]:
        """The next message (and a descriptor that came with it). Raises SiteError for an error the
        site sends as fatal, or a closed channel; StepRefused for a refused step."""
        try:
            if with_fd:
                data, fds, _, _ = socket.recv_fds(self._sock, _MAX_PACKET, 1)
            else:
                data, fds = self._sock.recv(_MAX_PACKET), []
        except OSError as e:
            raise SiteLost(f"the site closed the trainer channel ({e})") from e
        if not data:
            raise SiteLost("the site closed the trainer channel (it stopped; see its log)")
        message: dict[str, Any] = json.loads(data.decode())
        fd = fds[0] if fds else None
        if message.get("op") == "error":
            if fd is not None:
                os.close(fd)
            if message.get("fatal", True):
                self.close()
                raise SiteError(message.get("error", "refused"))
            raise StepRefused(message.get("error", "refused"))
        return message, fd

    def close(self) -> None:
        self._sock.close()
