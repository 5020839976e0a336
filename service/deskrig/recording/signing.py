"""Which turns this rig recorded: an HMAC over every turn, with a key kept outside the artifacts.

The app under test can often write where recordings go (in a container it usually can), and
``replay_trajectory`` types and clicks whatever a turn's ``action.json`` says. So each turn folder
gets ``action.sig``::

    {"alg": "HMAC-SHA256", "key_id": "<16 hex>", "mac": "<64 hex>"}

The MAC covers a version tag, the turn's folder name and the previous turn's MAC (so turns cannot
be renumbered, reordered, or removed from the middle) and the exact bytes of ``action.json``.
Replay runs a recording only if every turn checks, unless the caller accepts unverified steps.

The key is 32 random bytes made when the server starts and kept in memory, so only this rig's own
recordings verify; or, to let later rigs replay a recording, it is read from the file named by
``recording_key_file`` / ``DESKRIG_RECORDING_KEY_FILE`` (give every such rig the same file, outside
any allowed directory, readable by the rig's user only). Never an environment variable: every app
the rig launches inherits its environment.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import sys
from pathlib import Path

from deskrig.config import Settings
from deskrig.errors import ConfigError

SIGNATURE_FILE = "action.sig"
ALGORITHM = "HMAC-SHA256"
MIN_KEY_BYTES = 16
#: Larger than any action.json a call can produce (type_text takes at most 100,000 characters).
MAX_TURN_FILE_BYTES = 8 * 1024 * 1024


class TurnFileError(Exception):
    """A turn file that is not a small regular file (a FIFO, a symlink, a huge file ...)."""


def read_turn_file(path: Path) -> bytes | None:
    """The bytes of a regular file of at most :data:`MAX_TURN_FILE_BYTES`, or None if it is missing.

    The folder is writable by others: no symlinks followed at the last step, no blocking on a
    FIFO, no reading a file that never ends.
    """
    try:
        if sys.platform == "win32":  # no O_NOFOLLOW nor FIFOs: the folder's ACL guards it
            fd = os.open(path, os.O_RDONLY | os.O_BINARY | os.O_NOINHERIT)
        else:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TurnFileError(f"{path.name} cannot be opened: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TurnFileError(f"{path.name} is not a regular file")
        data = fh.read(MAX_TURN_FILE_BYTES + 1)
    if len(data) > MAX_TURN_FILE_BYTES:
        raise TurnFileError(f"{path.name} is larger than {MAX_TURN_FILE_BYTES} bytes")
    return data


def recorded_mac(turn_folder: Path) -> str:
    """The MAC a turn folder's signature states ("" without a readable one): the next turn's link."""
    try:
        data = read_turn_file(turn_folder / SIGNATURE_FILE)
        signature = json.loads(data) if data is not None else None
    except (TurnFileError, ValueError):
        return ""
    mac = signature.get("mac") if isinstance(signature, dict) else None
    return mac if isinstance(mac, str) else ""


class TurnSigner:
    """Signs turns as they are written and checks them before a replay."""

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ConfigError(f"the recording key must be at least {MIN_KEY_BYTES} bytes, got {len(key)}")
        self._key = key
        #: Names the key in signatures (a hash: says nothing about the key itself).
        self.key_id = hashlib.sha256(b"deskrig-recording-key-id\0" + key).hexdigest()[:16]

    @classmethod
    def from_settings(cls, settings: Settings) -> TurnSigner:
        """The key from ``settings.recording_key_file``, else a fresh random one for this rig."""
        if settings.recording_key_file is None:
            return cls(secrets.token_bytes(32))
        path = Path(settings.recording_key_file).expanduser()
        try:
            key = path.read_bytes().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read the recording key file {path}: {exc.strerror or exc}") from exc
        return cls(key)

    def mac(self, turn: str, previous_mac: str, action: bytes) -> str:
        message = b"\0".join([b"deskrig-turn-v1", turn.encode(), previous_mac.encode(), action])
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def signature(self, turn: str, previous_mac: str, action: bytes) -> bytes:
        """The contents of ``action.sig`` for ``action`` (the bytes of action.json)."""
        mac = self.mac(turn, previous_mac, action)
        return json.dumps({"alg": ALGORITHM, "key_id": self.key_id, "mac": mac}).encode() + b"\n"

    def problem(self, turn: str, previous_mac: str, action: bytes, signature: bytes | None) -> str | None:
        """Why this turn cannot be trusted as this rig's recording, or None if its MAC checks."""
        if signature is None:
            return "unsigned: it has no action.sig"
        try:
            stated = json.loads(signature)
        except ValueError:
            stated = None
        if (
            not isinstance(stated, dict)
            or stated.get("alg") != ALGORITHM
            or not isinstance(stated.get("mac"), str)
        ):
            return "action.sig is not a deskrig turn signature"
        if stated.get("key_id") != self.key_id:
            return f"signed with another key (key id {stated.get('key_id')!r}; this rig's is {self.key_id!r})"
        if not hmac.compare_digest(stated["mac"], self.mac(turn, previous_mac, action)):
            return "its signature does not match: action.json was changed, or turns were moved or removed"
        return None
