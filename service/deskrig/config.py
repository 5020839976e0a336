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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

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
    "DESKRIG_BODY_TIMEOUT": (None, "body_timeout"),
    "DESKRIG_ALLOWED_DIRS": ("security", "allowed_directories"),
    "DESKRIG_MAX_CAPTURES_PER_MINUTE": ("security", "max_captures_per_minute"),
    "DESKRIG_BLOCKED_WINDOWS": ("security", "blocked_window_patterns"),
    "DESKRIG_AUDIT_LOG": ("security", "audit_log"),
    "DESKRIG_PII_MASKING": ("security.pii_masking", "enabled"),
    "DESKRIG_PII_DETECTORS": ("security.pii_masking", "detectors"),
    "DESKRIG_PII_PATTERNS": ("security.pii_masking", "custom_patterns"),
    "DESKRIG_PII_FILL": ("security.pii_masking", "fill"),
    "DESKRIG_RECORD": (None, "record_dir"),
    "DESKRIG_RECORD_VIDEO": (None, "record_video"),
    "DESKRIG_RECORDING_KEY_FILE": (None, "recording_key_file"),
    "DESKRIG_RECORDING_IDLE_TIMEOUT": (None, "recording_idle_timeout"),
    "DESKRIG_INPUT_LOCK_TIMEOUT": (None, "input_lock_timeout"),
    "DESKRIG_HELD_INPUT_IDLE_TIMEOUT": (None, "held_input_idle_timeout"),
    "DESKRIG_A11Y_EVENTS_IDLE_TIMEOUT": (None, "a11y_events_idle_timeout"),
    "DESKRIG_MAX_FILE_BYTES": (None, "max_file_bytes"),
    "DESKRIG_ALLOW_COMMANDS": (None, "allow_commands"),
}


def default_allowed_directories() -> list[str]:
    return [str(Path.home() / "deskrig")]


#: Seconds an HTTP client has to send a request's headers (``--header-timeout``).
DEFAULT_HEADER_TIMEOUT = 10.0
#: Seconds a request body may stall, nothing of it arriving while more is due (``--body-timeout``).
DEFAULT_BODY_TIMEOUT = 10.0
#: How long a server listens to the apps' accessibility events after its last tree read
#: (deskrig.a11y.atspi says why it stops).
A11Y_EVENTS_IDLE_TIMEOUT = 60.0


#: The built-in PII detectors (``deskrig.privacy.detectors``); custom ones are named regexes.
PII_DETECTORS = ("email", "phone", "card", "iban")


class PiiMaskingPolicy(BaseModel):
    """Which personal data is masked in what leaves the rig, and how (see ``deskrig.privacy``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Mask every capture, recording and accessibility text; off: only calls that ask (``mask_pii``).
    enabled: bool = False
    detectors: list[str] = Field(default_factory=lambda: list(PII_DETECTORS))
    #: Extra detectors: name -> regex (``re.search`` semantics); each match is masked and counted.
    custom_patterns: dict[str, str] = Field(default_factory=dict)
    #: How a masked box is drawn: a solid black box, or the pixels blurred past reading.
    fill: Literal["black", "blur"] = "black"
    #: Also OCR what the accessibility tree does not explain (canvases, images, apps without AT-SPI).
    ocr: bool = True

    @field_validator("detectors")
    @classmethod
    def _known_detectors(cls, detectors: list[str]) -> list[str]:
        unknown = [name for name in detectors if name not in PII_DETECTORS]
        if unknown:
            raise ValueError(f"unknown PII detector(s) {unknown}; known: {list(PII_DETECTORS)}")
        return detectors

    @field_validator("custom_patterns", mode="before")
    @classmethod
    def _patterns_from_text(cls, value: object) -> object:
        # DESKRIG_PII_PATTERNS: "name=regex" pairs separated by ";;" (a regex may hold ',' or ';');
        # --pii-pattern: a list of pairs.
        if isinstance(value, str | list):
            pairs = [p for p in (value.split(";;") if isinstance(value, str) else value) if str(p).strip()]
            if any(not isinstance(pair, str) or "=" not in pair for pair in pairs):
                raise ValueError("custom PII patterns are NAME=REGEX pairs separated by ';;'")
            return dict(pair.split("=", 1) for pair in pairs)
        return value

    @field_validator("custom_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: dict[str, str]) -> dict[str, str]:
        import re

        for name, pattern in patterns.items():
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
                raise ValueError(f"custom PII pattern name {name!r} must be a word (letters, digits, _)")
            if name in PII_DETECTORS:
                raise ValueError(f"custom PII pattern name {name!r} is a built-in detector's")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"custom PII pattern {name!r} is not a valid regex: {exc}") from exc
            if compiled.search(""):
                raise ValueError(f"custom PII pattern {name!r} matches the empty string")
        return patterns


class SecurityPolicy(BaseModel):
    """What a client may touch: output paths, capture rate, windows, and what is audited."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed_directories: list[str] = Field(default_factory=default_allowed_directories)
    max_captures_per_minute: int = Field(600, ge=1)
    blocked_window_patterns: list[str] = Field(default_factory=list)
    audit_log: str | None = Field(None, description="A file path, '-' or 'stderr' for stderr, None for off")
    pii_masking: PiiMaskingPolicy = Field(default_factory=PiiMaskingPolicy)

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
    #: Seconds a request body may go without a byte arriving before its connection is closed.
    body_timeout: float = Field(DEFAULT_BODY_TIMEOUT, gt=0, le=3600)
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
    #: The server stops listening to the apps' accessibility events (which toolkits send only while
    #: someone listens) this many seconds after its last tree read; the next read fetches the tree
    #: whole (0: listen for as long as the server runs).
    a11y_events_idle_timeout: float = Field(A11Y_EVENTS_IDLE_TIMEOUT, ge=0)
    #: Largest file upload_file/download_file and the /files endpoints move (default 25 MiB).
    max_file_bytes: int = Field(25 * 1024 * 1024, ge=1)
    #: run_command is refused unless this is on: it gives a token holder a shell as the rig's user.
    allow_commands: bool = False

    @model_validator(mode="after")
    def _video_not_unmasked(self) -> Settings:
        if self.record_video and self.security.pii_masking.enabled:
            raise ValueError(
                "record_video cannot be on while PII masking is on: video frames are not masked "
                "(record turn folders without video, or turn masking off)"
            )
        return self

    @field_validator("token", mode="before")
    @classmethod
    def _one_token_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


def _split_env(key: str, value: str) -> list[str]:
    sep = os.pathsep if key == "allowed_directories" else ","
    return [part.strip() for part in value.split(sep) if part.strip()]


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(base.setdefault(key, {}), dict):
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
    list_keys = {"allowed_hosts", "allowed_directories", "blocked_window_patterns", "detectors"}
    for var, (section, key) in ENV_KEYS.items():
        raw = env.get(var)
        if raw is None or raw == "":
            continue
        value: Any = _split_env(key, raw) if key in list_keys else raw
        layer = env_layer
        for name in section.split(".") if section else ():
            layer = layer.setdefault(name, {})
        layer[key] = value
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
