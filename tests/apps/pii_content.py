"""The personal data the PII fixture apps (gtk_pii.py, qt_pii.py, tk_pii.py) show, and the text beside it.

Stdlib only at import: imported by the apps (Debian's /usr/bin/python3, no Pillow), the tests and
``scripts/bench privacy``; :func:`draw_canvas` (Pillow) is for the latter two.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _form_log import FormLog

EMAIL = "jane.doe@example.com"
PHONE = "+1 415 555 0132"
#: Luhn-valid.
CARD = "4111 1111 1111 1111"
#: mod-97-valid.
IBAN = "DE89 3704 0044 0532 0130 00"
#: Matched by the custom pattern CUSTOM_PATTERN, named CUSTOM_NAME.
TICKET = "ORD-482913"
CUSTOM_NAME = "ticket"
CUSTOM_PATTERN = r"ORD-\d{6}"

#: (widget name, text) of the labels.
LABELS = [
    ("email_label", f"Mail {EMAIL}"),
    ("card_label", f"Card {CARD}"),
    ("ticket_label", f"Ticket {TICKET}"),
    ("notes_label", "Shipping notes"),
]
#: The phone entry has text around the number: where the toolkit gives character extents (GTK),
#: only the number is masked.
ENTRIES = [("phone_entry", f"Call {PHONE} today"), ("iban_entry", IBAN)]
#: Lines drawn on a canvas (no accessibility tree explains them): only OCR finds these.
CANVAS_LINES = [f"Reach {EMAIL}", f"Pay {CARD}", f"Ref {TICKET}", "Quarterly report"]
#: Text near the personal data that must stay readable.
UNRELATED = ["Shipping", "Quarterly", "today"]
SECRETS = [EMAIL, PHONE, CARD, IBAN, TICKET]
FONT_PX = 18

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def draw_canvas(path: Path) -> Path:
    """The GTK fixture's canvas (``PII_CANVAS_PNG``): CANVAS_LINES drawn as an image."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(FONT, FONT_PX)
    image = Image.new("RGB", (700, 36 * len(CANVAS_LINES) + 10), "white")
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(CANVAS_LINES):
        draw.text((10, 8 + row * 36), line, font=font, fill="black")
    image.save(path)
    return path


def app_arguments() -> tuple[str, FormLog]:
    """A fixture app's ``--title`` and its event log (``--log``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--title", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    return args.title, FormLog(args.log)
