"""Who is calling: named bearer tokens, and the identity (plus session) every call carries.

An identity is the name of the token a request authenticated with. ``--token SECRET`` (or
``DESKRIG_TOKEN``) is the identity ``default``; ``--token NAME=SECRET`` (repeatable) and a tokens
file (one ``NAME=SECRET`` per line) name more. Without auth every HTTP client is ``anonymous``;
on stdio the one peer is ``stdio``.

The rate limit keys on the identity alone, so opening new MCP sessions does not reset it.
Recordings, held input and the audit log key on the identity plus the MCP session id where the
protocol has one (handshake-era Streamable HTTP); a stateless 2026-07-28 client has none, and is
known by its identity only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from deskrig.errors import ConfigError

DEFAULT_IDENTITY = "default"
ANONYMOUS_IDENTITY = "anonymous"
STDIO_IDENTITY = "stdio"
#: The ASGI scope key under which the HTTP guard leaves the identity a request authenticated as.
SCOPE_KEY = "deskrig.identity"
#: Letters, digits, ``_``, ``.`` and ``-``; it appears in logs, audit lines and action.json.
IDENTITY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class ClientRef:
    """One caller: the identity it authenticated as, and its MCP session if the protocol has one."""

    identity: str
    session: str | None = None

    @property
    def key(self) -> str:
        """What recordings and held input are scoped to: ``identity`` or ``identity/session``."""
        return self.identity if self.session is None else f"{self.identity}/{self.session}"


def parse_token_spec(spec: str) -> tuple[str, str]:
    """``NAME=SECRET`` -> (NAME, SECRET); a bare ``SECRET`` -> (``default``, SECRET).

    A value is ``NAME=SECRET`` when what precedes the first ``=`` is a valid identity name and a
    secret follows that does not start with ``=``; base64 padding (``abc=``, ``abc==``) therefore
    stays part of a bare secret.
    """
    name, sep, secret = spec.partition("=")
    if sep and IDENTITY_NAME.fullmatch(name) and secret and not secret.startswith("="):
        return name, secret
    return DEFAULT_IDENTITY, spec


if sys.platform == "win32":

    def _unsafe(uid: int, mode: int) -> bool:
        """Windows files have ACLs, which neither st_uid nor st_mode show: nothing to check."""
        return False

else:

    def _unsafe(uid: int, mode: int) -> bool:
        """Owned by someone else than this user or root, or readable by others, or writable by
        anyone but the owner."""
        return uid not in (os.getuid(), 0) or bool(mode & (stat.S_IWGRP | stat.S_IWOTH | stat.S_IROTH))


def read_tokens_file(path: str | Path) -> list[tuple[str, str]]:
    """The ``NAME=SECRET`` lines of a tokens file (``#`` comments and blank lines skipped).

    The file must belong to this user (or root) and be neither writable by others nor readable
    by everyone: a world-readable file leaks every token, a group- or world-writable one lets
    someone add their own.
    """
    file = Path(path).expanduser()
    try:
        info = file.stat()
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read tokens file {file}: {exc.strerror}", details={"path": str(file)}
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"tokens file {file} is not UTF-8 text", details={"path": str(file)}) from exc
    mode = stat.S_IMODE(info.st_mode)
    if _unsafe(info.st_uid, mode):
        raise ConfigError(
            f"tokens file {file} has unsafe permissions {mode:04o} (owner uid {info.st_uid}): it must "
            "belong to you or root and not be readable by others nor writable by anyone else; "
            f"run `chmod 600 {file}`; a Docker secret is mounted 0444 unless given the rig's uid and "
            "mode 0400 (`--secret source=NAME,target=deskrig-tokens,uid=UID,mode=0400`)",
            details={"path": str(file), "mode": f"{mode:04o}", "uid": info.st_uid},
        )
    entries = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, secret = line.partition("=")
        name, secret = name.strip(), secret.strip()
        if not sep or not secret:
            raise ConfigError(
                f"tokens file {file} line {number}: expected NAME=SECRET",
                details={"path": str(file), "line": number},
            )
        entries.append((name, secret))
    return entries


class TokenTable:
    """The bearer tokens a rig accepts, each naming an identity. Validated once, at start-up."""

    def __init__(self, entries: Iterable[tuple[str, str]]) -> None:
        self._entries: list[tuple[str, bytes]] = []
        names: set[str] = set()
        secrets: set[str] = set()
        for name, secret in entries:
            if not IDENTITY_NAME.fullmatch(name):
                raise ConfigError(
                    f"identity name {name!r} is not valid: use 1-64 letters, digits, '_', '.' or '-', "
                    "starting with a letter or digit",
                    details={"identity": name},
                )
            if not secret:
                raise ConfigError(f"the token of identity {name!r} is empty", details={"identity": name})
            if name in names:
                raise ConfigError(
                    f"identity {name!r} is given more than one token", details={"identity": name}
                )
            if secret in secrets:
                raise ConfigError(
                    f"identity {name!r} has the same token as another identity; give each its own",
                    details={"identity": name},
                )
            names.add(name)
            secrets.add(secret)
            self._entries.append((name, _digest(secret)))
        if not self._entries:
            raise ConfigError("no bearer token is configured")

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._entries]

    def identify(self, credential: str) -> str | None:
        """The identity whose token ``credential`` is, or None. Compares digests (all of one length)
        against every token in constant time, so the timing says nothing about which token came
        close, nor how long the tokens are."""
        supplied = _digest(credential)
        found: str | None = None
        for name, secret in self._entries:
            if hmac.compare_digest(supplied, secret):
                found = name
        return found


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def token_table(specs: Sequence[str], tokens_file: str | None) -> TokenTable | None:
    """The table for ``--token`` values and a tokens file; None when neither gives a token."""
    entries = [parse_token_spec(spec) for spec in specs]
    if tokens_file:
        entries += read_tokens_file(tokens_file)
    return TokenTable(entries) if entries else None
