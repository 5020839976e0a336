"""The tests' own reader of images: tesseract's command-line program at settings unlike the rig's.

The rig reads with libtesseract, sparse-text segmentation, at screen size; this reader upscales
2x and segments as one uniform block (``--psm 6``) then as automatic layout (``--psm 3``), so a
string the rig's engine missed is unlikely to be missed here too.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apps"))
import pii_content as pii


def read_text(png: bytes) -> str:
    """Everything the reader makes of ``png``, at two segmentations."""
    image = Image.open(io.BytesIO(png)).convert("L")
    image = image.resize((image.width * 2, image.height * 2), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    texts = []
    for psm in ("6", "3"):
        done = subprocess.run(
            ["tesseract", "stdin", "stdout", "--psm", psm],
            input=buffer.getvalue(),
            capture_output=True,
            check=True,
            timeout=120,
        )
        texts.append(done.stdout.decode("utf-8", "replace"))
    return "\n".join(texts)


def _forms(secret: str) -> list[str]:
    """How ``secret`` may show in OCR text: as written, without spaces, its digits."""
    forms = [secret.lower(), secret.replace(" ", "").lower()]
    digits = "".join(ch for ch in secret if ch.isdigit())
    if len(digits) >= 6:
        forms.append(digits[-6:])  # any 6 digits of it in a row give it away
    if "@" in secret:
        forms += secret.lower().split("@")
    return forms


def leaked(text: str) -> list[str]:
    """The secrets (pii_content.SECRETS) any form of which the text shows."""
    flat = text.lower()
    squeezed = re.sub(r"\s+", "", flat)
    digits = re.sub(r"\D", "", flat)
    found = []
    for secret in pii.SECRETS:
        for form in _forms(secret):
            haystack = digits if form.isdigit() else squeezed if " " not in form else flat
            if form in haystack or form in flat:
                found.append(secret)
                break
    return found


def secrets_in(text: str) -> list[str]:
    """The secrets written out in ``text`` (JSON files, logs: no OCR noise to see through)."""
    return [secret for secret in pii.SECRETS if secret in text or secret.replace(" ", "") in text]
