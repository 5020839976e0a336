"""Settings and the security policy: frozen objects built once, then passed down.

Sources, later ones winning: built-in defaults < TOML file (``--config``) < ``DESKRIG_*``
environment variables < command-line flags. Nothing here reads the environment at import time.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from deskrig.errors import ConfigError

ToolProfile = Literal["default", "acs", "all"]

#: DESKRIG_* variable -> (section, key). Lists use os.pathsep (dirs) or commas (the rest).
ENV_KEYS: dict[str, tuple[str | None, str]] = {
    "DESKRIG_BACKEND": (None, "backend"),
    "DESKRIG_TOOL_PROFILE": (None, "tool_profile"),
    "DESKRIG_TOKEN": (None, "token"),
    "DESKRIG_TOKENS_FILE": (None, "tokens_file"),
    "DESKRIG_ALLOWED_HOSTS": (None, "allowed_hosts"),
    "DESKRIG_MAX_INLINE_BYTES": (None, "max_inline_bytes"),
    "DESKRIG_HEADER_TIMEOUT": (None, "header_timeout"),
    "DESKRIG_ALLOWED_DIRS": ("security", "allowed_directories"),
    "DESKRIG_MAX_CAPTURES_PER_MINUTE": ("security", "max_captures_per_minute"),
    "DESKRIG_BLOCKED_WINDOWS": ("security", "blocked_window_patterns"),
    "DESKRIG_AUDIT_LOG": ("security", "audit_log"),
    "DESKRIG_RECORD": (None, "record_dir"),
    "DESKRIG_RECORD_VIDEO": (None, "record_video"),
    "DESKRIG_RECORDING_KEY_FILE": (None, "recording_key_file"),
    "DESKRIG_RECORDING_IDLE_TIMEOUT": (None, "recording_idle_timeout"),
    "DESKRIG_INPUT_LOCK_TIMEOUT": (None, "input_lock_timeout"),
    "DESKRIG_HELD_INPUT_IDLE_TIMEOUT": (None, "held_input_idle_timeout"),
    "DESKRIG_MAX_FILE_BYTES": (None, "max_file_bytes"),
    "DESKRIG_ALLOW_COMMANDS": (None, "allow_commands"),
}


def default_allowed_directories() -> list[str]:
    return [str(Path.home() / "deskrig")]


#: Seconds an HTTP client has to send a request's headers (``--header-timeout``).
DEFAULT_HEADER_TIMEOUT = 10.0


class SecurityPolicy(BaseModel):
    """What a client may touch: output paths, capture rate, windows, and what is audited."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed_directories: list[str] = Field(default_factory=default_allowed_directories)
    max_captures_per_minute: int = Field(600, ge=1)
    blocked_window_patterns: list[str] = Field(default_factory=list)
    audit_log: str | None = Field(None, description="A file path, '-' or 'stderr' for stderr, None for off")

    @field_validator("blocked_window_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        import re

        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"blocked window pattern {pattern!r} is not a valid regex: {exc}") from exc
        return patterns


class Settings(BaseModel):
    """Everything a rig or an attached server needs to know, resolved once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = "auto"
    tool_profile: ToolProfile = "default"
    #: Bearer tokens: ``SECRET`` (the identity ``default``) or ``NAME=SECRET``, see deskrig.identity.
    token: list[str] = Field(default_factory=list)
    #: More ``NAME=SECRET`` tokens, one per line.
    tokens_file: str | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    max_inline_bytes: int = Field(1024 * 1024, ge=16 * 1024)
    #: Seconds an HTTP client has to send a request's headers before its connection is closed.
    header_timeout: float = Field(DEFAULT_HEADER_TIMEOUT, gt=0, le=3600)
    #: Reuse the encoding of an unchanged screen (the backend's damage tracking says when).
    reuse_unchanged_captures: bool = True
    security: SecurityPolicy = Field(default_factory=SecurityPolicy)
    #: Record every client's actions from start-up into this folder (the orchestrator's feed).
    record_dir: str | None = None
    #: ... and the display as recording.mp4 beside the turns.
    record_video: bool = False
    #: The key that signs recorded turns (replay runs only turns it verifies); default: a random
    #: key per server, so only its own recordings replay. Give rigs one file to share recordings.
    recording_key_file: str | None = None
    #: A session recording ends after this many seconds without a call from its owner (0: never).
    #: The only end a stateless client's recording has besides stop_recording and the rig stopping.
    recording_idle_timeout: float = Field(600.0, ge=0)
    #: How long an input call waits for another client's input to finish before BUSY.
    input_lock_timeout: float = Field(10.0, ge=0)
    #: Keys and buttons a client holds (key_down, mouse_down) are released after this many seconds
    #: without a call from it, when its connection's close cannot be seen (stateless clients; 0: never).
    held_input_idle_timeout: float = Field(120.0, ge=0)
    #: Largest file upload_file/download_file and the /files endpoints move (default 25 MiB).
    max_file_bytes: int = Field(25 * 1024 * 1024, ge=1)
    #: run_command is refused unless this is on: it gives a token holder a shell as the rig's user.
    allow_commands: bool = False

    @field_validator("token", mode="before")
    @classmethod
    def _one_token_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


def _split_env(key: str, value: str) -> list[str]:
    sep = os.pathsep if key == "allowed_directories" else ","
    return [part.strip() for part in value.split(sep) if part.strip()]


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        elif value is not None:
            base[key] = value


def load_settings(
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build :class:`Settings` from a TOML file, ``DESKRIG_*`` variables and flag overrides.

    ``overrides`` uses the same nested shape as the file (``{"security": {...}}``); ``None`` values
    mean "flag not given" and do not override.
    """
    data: dict[str, Any] = {"security": {}}
    if config_file is not None:
        path = Path(config_file).expanduser()
        try:
            with path.open("rb") as fh:
                _merge(data, tomllib.load(fh))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc

    env = os.environ if env is None else env
    env_layer: dict[str, Any] = {"security": {}}
    list_keys = {"allowed_hosts", "allowed_directories", "blocked_window_patterns"}
    for var, (section, key) in ENV_KEYS.items():
        raw = env.get(var)
        if raw is None or raw == "":
            continue
        value: Any = _split_env(key, raw) if key in list_keys else raw
        (env_layer["security"] if section else env_layer)[key] = value
    _merge(data, env_layer)
    if overrides:
        _merge(data, overrides)

    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]), "problem": err["msg"]} for err in exc.errors()
        ]
        raise ConfigError(
            "invalid settings: " + "; ".join(f"{p['field']}: {p['problem']}" for p in problems),
            details={"problems": problems},
        ) from exc
