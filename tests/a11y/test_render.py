"""An element's line of the text rendering: what get_app_state answers with by default, so what an
agent reads of each element unless it asks for the elements' data."""

from __future__ import annotations

from typing import Any

import pytest

from deskrig.a11y import Element
from deskrig.a11y.tree import ElementRef
from deskrig.model import Bounds

LONG = "Saves the document under a name you choose, in a folder you pick, as any format it can write"


def button(**fields: Any) -> Element:
    return Element(
        index=4,
        parent=2,
        depth=2,
        role="push button",
        name="Save",
        states=("enabled", "focusable", "showing", "visible"),
        bounds=Bounds(x=10, y=20, width=80, height=30),
        actions=("click",),
        ref=ElementRef(":1.7", "/org/a11y/atspi/accessible/4"),
        **fields,
    )


@pytest.mark.parametrize(
    ("description", "shown"),
    [
        ("", None),
        ("Save", None),  # the name again says nothing more
        ('Saves "it"\nnow', 'description="Saves \\"it\\"\\nnow"'),
        (LONG, f'description="{LONG[:80]}"…'),
    ],
)
def test_a_line_shows_the_description_quoted_and_capped_as_a_text(
    description: str, shown: str | None
) -> None:
    line = button(description=description).render_line()
    assert line.startswith('[4] push button "Save" ') and line.endswith("@ 10,20 80x30 actions=click")
    if shown is None:
        assert "description=" not in line
    else:
        assert line == f'[4] push button "Save" {shown} (enabled, focusable) @ 10,20 80x30 actions=click'


def test_a_text_is_capped_and_marked_where_it_goes_on() -> None:
    assert button(text=LONG).render_line().endswith(f'text="{LONG[:80]}"… actions=click')
    assert button(text="short", text_truncated=True).render_line().endswith('text="short"… actions=click')
