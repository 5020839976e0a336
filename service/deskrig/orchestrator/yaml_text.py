"""Plain data (dicts, lists, strings, numbers, booleans, None) as block-style YAML, with no YAML
library: ``deskrig k8s manifests`` works on a plain install, and the rig image carries no PyYAML.

A string is written plain only when no YAML 1.1 or 1.2 reader can take it for anything else (a
letter, then letters, digits and ``_ . / -``; not a boolean or null word); any other string is
double-quoted, with every character that could be read as a line break or is not printable
escaped. Nothing is shared between nodes, so there are no anchors or aliases.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

#: Strings safe to write unquoted.
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")
#: Words that YAML 1.1 readers (PyYAML, go-yaml v2) resolve to a boolean or null, in any case.
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
#: YAML readers take an implicit mapping key of at most 1024 characters.
_MAX_KEY = 1024
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}

Data = Mapping[str, "Data"] | Sequence["Data"] | str | int | float | bool | None


def _printable(char: str) -> bool:
    """Whether ``char`` may stand as itself in a double-quoted scalar: printable in YAML and not a
    line break (NEL, LS, PS) nor a byte-order mark."""
    code = ord(char)
    printable = 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000
    return printable and code not in (0x2028, 0x2029, 0xFEFF)


def _escaped(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if _printable(char):
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _string(text: str) -> str:
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    return '"' + "".join(_escaped(char) for char in text) + '"'


def _scalar(value: Data) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        return repr(value) if math.isfinite(value) else (".inf" if value > 0 else "-.inf")
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"mapping keys must be strings, not {type(key).__name__}")
    written = _string(key)
    if len(written) > _MAX_KEY:
        raise ValueError(f"a mapping key of {len(written)} characters is longer than YAML readers take")
    return written


def _lines(value: Data, indent: int) -> list[str]:
    """``value`` (a non-empty mapping or sequence) as lines indented by ``indent`` spaces."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if _nested(item):
                lines.append(f"{pad}{_key(key)}:")
                lines += _lines(item, indent + 2)
            else:
                lines.append(f"{pad}{_key(key)}: {_inline(item)}")
        return lines
    assert isinstance(value, Sequence) and not isinstance(value, str)
    for item in value:
        if _nested(item):
            # The item's first line goes on the dash: "- key: value", then its other lines below.
            first, *rest = _lines(item, indent + 2)
            lines += [f"{pad}- {first[indent + 2 :]}", *rest]
        else:
            lines.append(f"{pad}- {_inline(item)}")
    return lines


def _nested(value: Data) -> bool:
    """Whether ``value`` takes lines of its own: a non-empty mapping or sequence."""
    return isinstance(value, Mapping | list | tuple) and len(value) > 0


def _inline(value: Data) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return _scalar(value)


def dump(value: Data) -> str:
    """One YAML document holding ``value``."""
    return "\n".join(_lines(value, 0) if _nested(value) else [_inline(value)]) + "\n"


def dump_all(documents: Iterable[Data]) -> str:
    """A YAML stream of ``documents``, each started with ``---``."""
    return "".join(f"---\n{dump(document)}" for document in documents)
