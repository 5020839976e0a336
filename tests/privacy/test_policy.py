"""The masking policy: its detectors on known strings, and bad policy input refused up front."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskrig.cli import main
from deskrig.config import PiiMaskingPolicy, load_settings
from deskrig.errors import ConfigError
from deskrig.privacy import Detectors, iban_valid, luhn_valid


def detect(text: str, **policy: object) -> list[tuple[str, str]]:
    detectors = Detectors(PiiMaskingPolicy.model_validate(policy))
    return [(f.kind, text[f.start : f.end]) for f in detectors.find(text)]


def test_card_numbers_need_the_luhn_check_and_ibans_the_mod_97_check() -> None:
    assert luhn_valid("4111 1111 1111 1111") and not luhn_valid("4111 1111 1111 1112")
    assert iban_valid("DE89 3704 0044 0532 0130 00") and not iban_valid("DE88 3704 0044 0532 0130 00")
    assert detect("Card 4111-1111-1111-1111 or 4111 1111 1111 1112") == [("card", "4111-1111-1111-1111")]
    found = detect("IBAN GB82 WEST 1234 5698 7654 32, not GB82 WEST 1234 5698 7654 33", detectors=["iban"])
    assert found == [("iban", "GB82 WEST 1234 5698 7654 32")]


def test_each_string_is_found_once_by_the_first_detector_that_claims_it() -> None:
    text = "Mail jane.doe@example.com, call +1 (415) 555-0132 about ORD-482913 on 2024-01-15 (v1.2.3)"
    assert detect(text, custom_patterns={"ticket": r"ORD-\d{6}"}) == [
        ("email", "jane.doe@example.com"),
        ("phone", "+1 (415) 555-0132"),
        ("ticket", "ORD-482913"),
    ]
    assert detect(text, detectors=["email"]) == [("email", "jane.doe@example.com")]


def test_text_is_redacted_with_the_detectors_name_and_counted() -> None:
    detectors = Detectors(PiiMaskingPolicy())
    assert detectors.redact("to jane@example.org or jim@example.org") == (
        "to [redacted:email] or [redacted:email]",
        {"email": 2},
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DESKRIG_PII_PATTERNS": "ticket=ORD-(\\d"}, "custom PII pattern 'ticket' is not a valid regex"),
        ({"DESKRIG_PII_PATTERNS": "ORD-\\d+"}, "NAME=REGEX pairs"),
        ({"DESKRIG_PII_PATTERNS": "empty=x*"}, "matches the empty string"),
        ({"DESKRIG_PII_DETECTORS": "email,passport"}, "unknown PII detector.*passport"),
        ({"DESKRIG_PII_MASKING": "maybe"}, "security.pii_masking.enabled"),
        ({"DESKRIG_PII_MASKING": "on", "DESKRIG_RECORD_VIDEO": "1"}, "record_video cannot be on while PII"),
    ],
)
def test_bad_policy_input_is_a_clear_settings_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env=env)


def test_video_may_be_recorded_while_windows_are_blocked() -> None:
    """Its frames come through the observation path, which blacks blocked windows out."""
    settings = load_settings(env={"DESKRIG_BLOCKED_WINDOWS": "^Vault", "DESKRIG_RECORD_VIDEO": "1"})
    assert settings.record_video and settings.security.blocked_window_patterns == ["^Vault"]


def test_the_policy_comes_from_the_config_file_variables_and_flags(tmp_path: Path) -> None:
    config = tmp_path / "deskrig.toml"
    config.write_text(
        '[security.pii_masking]\nenabled = true\nfill = "blur"\ncustom_patterns = {ticket = "T-\\\\d+"}\n'
    )
    policy = load_settings(config, env={"DESKRIG_PII_DETECTORS": "email,card"}).security.pii_masking
    assert (policy.enabled, policy.fill, policy.detectors) == (True, "blur", ["email", "card"])
    assert policy.custom_patterns == {"ticket": "T-\\d+"}
    assert load_settings(env={}).security.pii_masking.enabled is False


def test_a_bad_pattern_stops_the_server_at_start_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--stdio", "--pii-pattern", "ticket=(("]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert "custom PII pattern 'ticket' is not a valid regex" in lines[0]
