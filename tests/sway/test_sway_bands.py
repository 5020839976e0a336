"""sway's frames go through the same banded encoders as X11's: a screen grab's JPEG is libjpeg's
own restart-interval JPEG of it and its PNG every pixel of it, from the first frame and from one
stitched onto the bands kept from the first."""

from __future__ import annotations

import io

from PIL import Image
from tests.desktop.conftest import FixtureApp
from tests.frames import libjpeg_restart_encode
from tests.polling import poll
from tests.sway.conftest import COLOR, window_of

from deskrig import imaging
from deskrig.desktop import Desktop


def test_sway_screen_grabs_are_encoded_exactly_in_bands(sway_desktop: Desktop, color_app: FixtureApp) -> None:
    window = window_of(sway_desktop, color_app)
    poll("the colour app drawn", lambda: sway_desktop.capture(window.bounds).getpixel((20, 20)) == COLOR)
    screen = sway_desktop.screen_bounds()
    for _ in range(2):  # the second: bands kept from the first wherever the screen is the same
        frame = sway_desktop.grab(screen)
        assert frame.bgrx is not None, "sway hands the encoders its BGRX rows"
        assert imaging.encode(frame, "jpeg") == libjpeg_restart_encode(frame, imaging.DEFAULT_QUALITY["jpeg"])
        png = Image.open(io.BytesIO(imaging.encode(frame, "png")))
        assert png.tobytes() == frame.image().tobytes()
