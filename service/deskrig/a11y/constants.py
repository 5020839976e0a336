"""AT-SPI enumerations and D-Bus names, as at-spi2-core 2.46 defines them.

Role and state numbers travel as integers on the wire; these tables turn them into the names that
``Accessible.GetRoleName`` would return, without a round trip per element.
"""

from __future__ import annotations

import functools
from typing import Any

DBUS_NAME = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"
#: The AT-SPI bus launcher on the session bus: where the accessibility bus is, and whether it is on.
A11Y_BUS_NAME = "org.a11y.Bus"
A11Y_BUS_PATH = "/org/a11y/bus"
A11Y_STATUS = "org.a11y.Status"
REGISTRY_BUS_NAME = "org.a11y.atspi.Registry"
ROOT_PATH = "/org/a11y/atspi/accessible/root"
CACHE_PATH = "/org/a11y/atspi/cache"
NULL_PATH = "/org/a11y/atspi/null"

IFACE_PREFIX = "org.a11y.atspi."
ACCESSIBLE = IFACE_PREFIX + "Accessible"
ACTION = IFACE_PREFIX + "Action"
APPLICATION = IFACE_PREFIX + "Application"
CACHE = IFACE_PREFIX + "Cache"
COLLECTION = IFACE_PREFIX + "Collection"
COMPONENT = IFACE_PREFIX + "Component"
EDITABLE_TEXT = IFACE_PREFIX + "EditableText"
TEXT = IFACE_PREFIX + "Text"
VALUE = IFACE_PREFIX + "Value"
PROPERTIES = "org.freedesktop.DBus.Properties"

#: ``AtspiCoordType``: screen (root window) pixels.
COORD_TYPE_SCREEN = 0
COORD_TYPE_WINDOW = 1

#: ``AtspiRole``, indexed by role number (``atspi_role_get_name`` spelling).
ROLE_NAMES: tuple[str, ...] = (
    "invalid",
    "accelerator label",
    "alert",
    "animation",
    "arrow",
    "calendar",
    "canvas",
    "check box",
    "check menu item",
    "color chooser",
    "column header",
    "combo box",
    "dateeditor",
    "desktop icon",
    "desktop frame",
    "dial",
    "dialog",
    "directory pane",
    "drawing area",
    "file chooser",
    "filler",
    "focus traversable",
    "font chooser",
    "frame",
    "glass pane",
    "html container",
    "icon",
    "image",
    "internal frame",
    "label",
    "layered pane",
    "list",
    "list item",
    "menu",
    "menu bar",
    "menu item",
    "option pane",
    "page tab",
    "page tab list",
    "panel",
    "password text",
    "popup menu",
    "progress bar",
    "push button",
    "radio button",
    "radio menu item",
    "root pane",
    "row header",
    "scroll bar",
    "scroll pane",
    "separator",
    "slider",
    "spin button",
    "split pane",
    "status bar",
    "table",
    "table cell",
    "table column header",
    "table row header",
    "tear off menu item",
    "terminal",
    "text",
    "toggle button",
    "tool bar",
    "tool tip",
    "tree",
    "tree table",
    "unknown",
    "viewport",
    "window",
    "extended",
    "header",
    "footer",
    "paragraph",
    "ruler",
    "application",
    "autocomplete",
    "edit bar",
    "embedded component",
    "entry",
    "chart",
    "caption",
    "document frame",
    "heading",
    "page",
    "section",
    "redundant object",
    "form",
    "link",
    "input method window",
    "table row",
    "tree item",
    "document spreadsheet",
    "document presentation",
    "document text",
    "document web",
    "document email",
    "comment",
    "list box",
    "grouping",
    "image map",
    "notification",
    "info bar",
    "level bar",
    "title bar",
    "block quote",
    "audio",
    "video",
    "definition",
    "article",
    "landmark",
    "log",
    "marquee",
    "math",
    "rating",
    "timer",
    "static",
    "math fraction",
    "math root",
    "subscript",
    "superscript",
    "description list",
    "description term",
    "description value",
    "footnote",
    "content deletion",
    "content insertion",
    "mark",
    "suggestion",
    "push button menu",
)

#: ``AtspiStateType``, indexed by bit number of the two-word state set.
STATE_NAMES: tuple[str, ...] = (
    "invalid",
    "active",
    "armed",
    "busy",
    "checked",
    "collapsed",
    "defunct",
    "editable",
    "enabled",
    "expandable",
    "expanded",
    "focusable",
    "focused",
    "has_tooltip",
    "horizontal",
    "iconified",
    "modal",
    "multi_line",
    "multiselectable",
    "opaque",
    "pressed",
    "resizable",
    "selectable",
    "selected",
    "sensitive",
    "showing",
    "single_line",
    "stale",
    "transient",
    "vertical",
    "visible",
    "manages_descendants",
    "indeterminate",
    "required",
    "truncated",
    "animated",
    "invalid_entry",
    "supports_autocompletion",
    "selectable_text",
    "is_default",
    "visited",
    "checkable",
    "has_popup",
    "read_only",
)

STATE_SHOWING = STATE_NAMES.index("showing")
STATE_DEFUNCT = STATE_NAMES.index("defunct")
STATE_MANAGES_DESCENDANTS = STATE_NAMES.index("manages_descendants")


#: ``Collection.GetMatches(rule, sortby, count, traverse)``: a MatchRule is (states, state match
#: type, attributes, attribute match type, roles, role match type, interfaces, interface match
#: type, invert). MATCH_ALL (1) with an empty list matches everything.
MATCH_RULE_SIGNATURE = "(aiia{ss}iaiiasib)uib"
_MATCH_ALL = 1
_SORT_CANONICAL = 1
#: Arguments for GetMatches that list an object's direct children with the SHOWING state.
SHOWING_CHILDREN: tuple[Any, ...] = (
    ([1 << STATE_SHOWING, 0], _MATCH_ALL, {}, _MATCH_ALL, [], _MATCH_ALL, [], _MATCH_ALL, False),
    _SORT_CANONICAL,
    0,  # no limit
    False,  # direct children only
)


def role_name(role: int) -> str:
    return ROLE_NAMES[role] if 0 <= role < len(ROLE_NAMES) else f"role {role}"


def state_bits(words: list[int]) -> int:
    """Fold the ``au`` state set (32 states per word, low word first) into one integer."""
    bits = 0
    for shift, word in enumerate(words):
        bits |= word << (32 * shift)
    return bits


@functools.cache
def state_names(bits: int) -> tuple[str, ...]:
    """The names of the states set in ``bits`` (few distinct sets occur, so this is memoised)."""
    return tuple(name for number, name in enumerate(STATE_NAMES) if bits >> number & 1)
