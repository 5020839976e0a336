"""Where and how a server listens, checked before anything starts.

Kept free of the MCP and HTTP stacks so that ``deskrig rig run`` can refuse a bad flag at once and
import those (about a second) while the display and the app start.
"""

from __future__ import annotations

import ipaddress
import secrets
import sys
from dataclasses import dataclass, field

from deskrig.config import Settings
from deskrig.errors import ConfigError
from deskrig.identity import DEFAULT_IDENTITY, TokenTable, token_table


@dataclass(frozen=True)
class Transport:
    """``stdio``, or ``http`` on host:port."""

    kind: str
    host: str = "127.0.0.1"
    port: int = 0
    no_auth: bool = False
    allowed_hosts: list[str] = field(default_factory=list)

    @classmethod
    def parse_http(
        cls, value: str, *, no_auth: bool = False, allowed_hosts: list[str] | None = None
    ) -> Transport:
        host, sep, port = value.rpartition(":")
        if not sep or not port.isdigit() or not (0 < int(port) < 65536):
            raise ConfigError(f"--http wants HOST:PORT, got {value!r}", details={"http": value})
        return cls("http", host.strip("[]") or "127.0.0.1", int(port), no_auth, list(allowed_hosts or []))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, tokens: TokenTable | None, no_auth: bool) -> None:
    """Refuse a configuration that would expose an unauthenticated rig beyond this machine."""
    if no_auth and not is_loopback(host):
        raise ConfigError(
            f"--no-auth is only allowed on a loopback address, not {host!r}",
            details={"bind": host},
        )
    if not no_auth and tokens is None:
        raise ConfigError("a token is required when auth is on")


def resolve_tokens(settings: Settings, transport: Transport) -> TokenTable | None:
    """The bearer tokens to accept, generating one for the identity ``default`` (announced on
    stderr) when none is configured. None means no auth: stdio, or ``--no-auth``."""
    if transport.kind != "http":
        return None  # stdio: whoever holds the pipes is the client
    if transport.no_auth:
        check_bind(transport.host, None, no_auth=True)
        if settings.token or settings.tokens_file:
            print("deskrig: --no-auth: the configured tokens are not checked", file=sys.stderr, flush=True)
        return None
    tokens = token_table(settings.token, settings.tokens_file)
    if tokens is None:
        token = secrets.token_urlsafe(24)
        print(f"deskrig: generated bearer token: {token}", file=sys.stderr, flush=True)
        tokens = TokenTable([(DEFAULT_IDENTITY, token)])
    check_bind(transport.host, tokens, False)
    return tokens
