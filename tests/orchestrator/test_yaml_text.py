"""The YAML writer behind ``deskrig k8s manifests``, read back by an independent reader (PyYAML):
every value comes back as exactly the object written, whatever its strings hold."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from deskrig.orchestrator import yaml_text

#: Strings a careless writer gets wrong: YAML 1.1 booleans and nulls, numbers, indicators,
#: comments, line breaks YAML folds, characters a reader refuses unescaped.
TRICKY = [
    "yes",
    "No",
    "ON",
    "off",
    "y",
    "n",
    "true",
    "False",
    "null",
    "~",
    "",
    " ",
    " lead",
    "trail ",
    "80",
    "0x1F",
    "1e3",
    "0o17",
    ".inf",
    "-.inf",
    ".nan",
    "2026-12-01",
    "1:30",
    "<<",
    "=",
    "a: b",
    "a #b",
    "#x",
    "- dash",
    "-",
    "?",
    "? q",
    ":",
    "*alias",
    "&anchor",
    "!tag",
    "%YAML",
    "@at",
    "`tick",
    "'single'",
    '"double"',
    "back\\slash",
    "multi\nline",
    "crlf\r\n",
    "tab\there",
    "nul\0",
    "bell\x07",
    "del\x7f",
    "nel\x85",
    "ls\u2028",
    "ps\u2029",
    "bom\ufeff",
    "é ü",
    "\U0001f600",
    "[list]",
    "{map}",
    "a,b",
    "|",
    ">",
    "app.kubernetes.io/name",
    "deskrig-orchestrator",
]


@pytest.mark.parametrize("text", TRICKY)
def test_a_string_reads_back_as_itself_as_a_value_and_as_a_key(text: str) -> None:
    document = {text: text, "list": [text, {text: [text]}]}
    assert yaml.safe_load(yaml_text.dump(document)) == document


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        None,
        True,
        False,
        0,
        -7,
        2**70,
        1.5,
        -0.25,
        float("inf"),
        float("-inf"),
        {"a": {}, "b": []},
        [[1, [2]], []],
    ],
    ids=repr,
)
def test_scalars_and_empty_collections_read_back_as_themselves(value: Any) -> None:
    assert yaml.safe_load(yaml_text.dump({"value": value})) == {"value": value}
    assert yaml.safe_load(yaml_text.dump(value)) == value


def test_a_stream_reads_back_as_its_documents_without_anchors() -> None:
    shared = {"app": "deskrig"}
    documents = [{"metadata": {"labels": shared}}, {"metadata": {"labels": shared}}, []]
    stream = yaml_text.dump_all(documents)
    assert list(yaml.safe_load_all(stream)) == documents
    assert "&" not in stream and "*" not in stream


def test_what_yaml_cannot_hold_is_refused() -> None:
    with pytest.raises(TypeError, match="keys must be strings"):
        yaml_text.dump({1: "one"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="cannot write set"):
        yaml_text.dump({"a": {1}})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="longer than YAML readers take"):
        yaml_text.dump({"k" * 1100: 1})


_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=30)
_data = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=20), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_data)
def test_any_data_reads_back_as_itself(value: Any) -> None:
    assert yaml.safe_load(yaml_text.dump(value)) == value
