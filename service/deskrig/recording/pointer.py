"""The mouse pointer drawn onto a video frame, for a backend whose captures leave it out.

A person reviewing an agent's video needs to see where the pointer is and where it clicks, but
X11, macOS and Windows screen reads never show it (sway's do: ``captures_show_pointer``). So the
recorder draws a standard arrow (white, outlined in black, its tip at the pointer's position), the
same on every backend, onto each frame it sends. Screenshots stay as captured.

Only the arrow's rectangle of the frame is redrawn: its rows are cut out of the BGRX frame, the
arrow is pasted on with Pillow, every blocked window's area in it is painted black again (a
blocked window stays wholly black, the pointer over it too), and the rectangle is written back
into a copy of the frame. Clipped at the frame's edges.
"""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image, ImageDraw

from deskrig.grabs import BGRX_PIXEL
from deskrig.model import Bounds

#: The arrow's outline, tip (the hotspot) at (0, 0): the classic pointer, 13 x 21 pixels.
ARROW = ((0, 0), (0, 17), (4, 13), (7, 20), (10, 19), (7, 12), (12, 12))


def _arrow_sprite() -> Image.Image:
    sprite = Image.new("RGBA", (13, 21), (0, 0, 0, 0))
    ImageDraw.Draw(sprite).polygon(ARROW, fill="white", outline="black")
    return sprite


#: The arrow as an image with an alpha mask.
SPRITE = _arrow_sprite()


def with_pointer(
    rows: bytes | bytearray,
    size: tuple[int, int],
    origin: tuple[int, int],
    pointer: tuple[int, int],
    blocked: Sequence[Bounds] = (),
) -> bytes | bytearray:
    """The BGRX frame ``rows`` of ``size``, showing the screen from ``origin``, with the arrow drawn
    at the screen point ``pointer``, except where it lies over a ``blocked`` area (screen bounds),
    which stays black. ``rows`` itself when the pointer is off the frame; else a new frame."""
    width, height = size
    left, top = pointer[0] - origin[0], pointer[1] - origin[1]
    x0, y0 = max(left, 0), max(top, 0)
    x1, y1 = min(left + SPRITE.width, width), min(top + SPRITE.height, height)
    if x0 >= x1 or y0 >= y1:
        return rows
    stride, run = width * BGRX_PIXEL, (x1 - x0) * BGRX_PIXEL
    starts = [row * stride + x0 * BGRX_PIXEL for row in range(y0, y1)]
    cut = b"".join(rows[start : start + run] for start in starts)
    patch = Image.frombytes("RGB", (x1 - x0, y1 - y0), cut, "raw", "BGRX")
    patch.paste(SPRITE, (left - x0, top - y0), SPRITE)
    for area in blocked:
        box = (
            max(area.x - origin[0], x0) - x0,
            max(area.y - origin[1], y0) - y0,
            min(area.right - origin[0], x1) - x0,
            min(area.bottom - origin[1], y1) - y0,
        )
        if box[0] < box[2] and box[1] < box[3]:
            patch.paste((0, 0, 0), box)
    drawn = patch.tobytes("raw", "BGRX")
    framed = bytearray(rows)
    for index, start in enumerate(starts):
        framed[start : start + run] = drawn[index * run : (index + 1) * run]
    return framed
