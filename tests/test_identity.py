"""identity: token specs, the token table's checks and the tokens file's format and permissions."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from deskrig.errors import ConfigError
from deskrig.identity import ClientRef, TokenTable, parse_token_spec, read_tokens_file, token_table


def test_token_specs_name_identities_and_keep_base64_padding() -> None:
    assert parse_token_spec("alice=s3cret") == ("alice", "s3cret")
    assert parse_token_spec("ci.runner-2=a=b") == ("ci.runner-2", "a=b")
    assert parse_token_spec("plain-secret") == ("default", "plain-secret")
    padded = base64.b64encode(b"abcd").decode()  # ends in "=="
    assert parse_token_spec(padded) == ("default", padded)
    assert parse_token_spec("YWJjZGU=") == ("default", "YWJjZGU=")
    assert parse_token_spec("bad name=x") == ("default", "bad name=x")


def test_token_table_identifies_every_token_and_nothing_else() -> None:
    table = TokenTable([("alice", "s3cret-a"), ("bob", "s3cret-b")])
    assert table.names == ["alice", "bob"]
    assert (table.identify("s3cret-a"), table.identify("s3cret-b")) == ("alice", "bob")
    for wrong in ["", "s3cret-", "s3cret-ab", "S3CRET-A", "alice"]:
        assert table.identify(wrong) is None


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([("alice", "x1"), ("alice", "x2")], "identity 'alice' is given more than one token"),
        ([("alice", "same"), ("bob", "same")], "identity 'bob' has the same token as another"),
        ([("", "x")], "identity name '' is not valid"),
        ([("-alice", "x")], "is not valid"),
        ([("a b", "x")], "is not valid"),
        ([("alice", "")], "the token of identity 'alice' is empty"),
        ([], "no bearer token"),
    ],
)
def test_token_table_refuses_ambiguous_configurations(entries: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TokenTable(entries)


def write_tokens(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_tokens_file_format(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens", "# agents\n\n alice = s3cret-a \nbob=s3=cret\n", 0o600)
    assert read_tokens_file(tokens) == [("alice", "s3cret-a"), ("bob", "s3=cret")]
    table = token_table(["default-secret"], str(tokens))
    assert table is not None and table.names == ["default", "alice", "bob"]
    assert token_table([], None) is None
    broken = write_tokens(tmp_path / "broken", "alice=a\njust-a-secret\n", 0o600)
    with pytest.raises(ConfigError, match="line 2: expected NAME=SECRET"):
        read_tokens_file(broken)
    with pytest.raises(ConfigError, match="cannot read tokens file"):
        read_tokens_file(tmp_path / "missing")


@pytest.mark.parametrize(
    ("mode", "safe"),
    # 0444: a Docker secret's default mode; 0400 with the rig's uid: what the swarm runtime mounts.
    [
        (0o600, True),
        (0o400, True),
        (0o640, True),
        (0o644, False),
        (0o444, False),
        (0o620, False),
        (0o602, False),
    ],
)
def test_tokens_file_permissions(tmp_path: Path, mode: int, safe: bool) -> None:
    tokens = write_tokens(tmp_path / "tokens", "alice=s3cret\n", mode)
    if safe:
        assert read_tokens_file(tokens) == [("alice", "s3cret")]
    else:
        with pytest.raises(ConfigError, match=f"unsafe permissions {mode:04o}.*chmod 600.*uid=UID,mode=0400"):
            read_tokens_file(tokens)


def test_client_key_scopes_by_session_where_there_is_one() -> None:
    assert ClientRef("alice", "abc").key == "alice/abc"
    assert ClientRef("alice").key == "alice"
