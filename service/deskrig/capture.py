"""The one capture pipeline behind every screenshot tool.

observe (``deskrig.observation``: capture, black out blocked windows, mask personal data) -> scale (only if ``max_width`` asks) -> encode ->
save the full-fidelity file (if ``save_dir``) -> fit the inline copy under ``max_inline_bytes``.

An unchanged screen is not encoded twice: the backend's damage serial tells whether anything
changed since the last capture of the same request, and the cached encoding is reused.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from deskrig import imaging
from deskrig.config import Settings
from deskrig.errors import file_system_error
from deskrig.model import Bounds, DisplayInfo, WindowInfo
from deskrig.observation import Observer, Pixels
from deskrig.privacy import MaskReport
from deskrig.security import SecurityContext

FORMAT_DESCRIPTION = "Image format: png, jpeg, webp or bmp"
QUALITY_DESCRIPTION = "JPEG/WebP quality 1-100 (default 80); PNG: 1-100 maps to compression"


class CaptureOptions(BaseModel):
    """Encoding and output options shared by the screenshot tools."""

    format: str = Field(
        "png", description=FORMAT_DESCRIPTION, json_schema_extra={"enum": list(imaging.SUPPORTED_FORMATS)}
    )
    quality: int | None = Field(None, ge=1, le=100, description=QUALITY_DESCRIPTION)
    max_width: int | None = Field(
        None, ge=16, description="Scale the image down to at most this width; never scaled otherwise"
    )
    save_dir: str | None = Field(
        None,
        description="Also save the full-fidelity image under {save_dir}/YYYY-MM-DD/ (must be an allowed directory)",
    )
    mask_pii: bool | None = Field(
        None,
        description="Mask e-mail addresses, phone numbers, card numbers, IBANs and the policy's custom "
        "patterns (accessibility tree + OCR). Always on when the rig's PII masking policy is on",
    )


class Origin(BaseModel):
    x: int
    y: int


class ScreenshotMetadata(BaseModel):
    """What was captured and how image pixels map back to screen pixels.

    ``screen_x = origin.x + image_x / scale`` (and likewise for y).
    """

    source: str = Field(description="screen, window or region")
    width: int = Field(description="Inline image width in pixels")
    height: int = Field(description="Inline image height in pixels")
    format: str
    mime_type: str
    byte_size: int = Field(description="Size of the inline image in bytes")
    quality: int | None = None
    timestamp: str = Field(description="ISO-8601 capture time (UTC)")
    region: Bounds = Field(description="Captured area in screen pixels")
    scale: float = Field(description="Image pixels per screen pixel (1.0 = not scaled)")
    origin: Origin = Field(description="Screen position of image pixel (0, 0)")
    display: DisplayInfo | None = None
    window: WindowInfo | None = None
    adjustments: list[str] = Field(
        default_factory=list, description="What was done to keep the inline image under the size limit"
    )
    masked_windows: int = Field(0, description="Blocked windows blacked out in this image")
    window_capture: str | None = Field(
        None,
        description="A window's pixels: how they were obtained (composite: the compositor's copy of the "
        "window; screen: its screen area, nothing over it, or, without a compositor, what covers it; "
        "screen_uncovered: its screen area while the windows over it were hidden; model: scripted)",
    )
    pii_masking: MaskReport | None = Field(
        None,
        description="Personal data masked in this image, per detector and engine; null when not masking",
    )
    saved_path: str | None = Field(None, description="Absolute path of the saved full-fidelity file")
    saved_byte_size: int | None = None
    from_cache: bool = Field(False, description="Screen unchanged since the last identical capture")


@dataclass(frozen=True)
class CaptureTarget:
    """What to grab: a screen region, or one window's own pixels."""

    source: str
    region: Bounds
    window: WindowInfo | None = None
    display: DisplayInfo | None = None
    include_frame: bool = False


@dataclass
class _Encoded:
    #: What the full-fidelity file is encoded from, kept only when the inline copy was stepped
    #: down (else the file is the inline copy). The unchanged-screen cache holds this object until
    #: the next capture, and a frame held then pins its grabber's buffer
    #: (:class:`deskrig.grabs.KeptFrames`): the next grab must fill the other buffer, copying every
    #: band changed in the last two grabs, where a free one is refreshed in place.
    stepped_down_image: imaging.Picture | None
    fmt: str
    quality: int | None
    inline: imaging.InlineImage
    masked: int
    pii: MaskReport | None
    window_capture: str | None = None
    _full: bytes | None = None

    def full(self) -> bytes:
        """The requested encoding at full fidelity; the inline copy unless it was stepped down."""
        if self._full is None:
            image = self.stepped_down_image
            self._full = self.inline.data if image is None else imaging.encode(image, self.fmt, self.quality)
        return self._full


class CapturePipeline:
    """Observes, encodes and saves; caches encodings of an unchanged screen."""

    def __init__(self, observer: Observer, settings: Settings, security: SecurityContext) -> None:
        self._observer = observer
        self._settings = settings
        self._security = security
        self._lock = threading.Lock()
        self._cache: tuple[object, int, _Encoded] | None = None

    def is_quick(self, options: CaptureOptions) -> bool:
        """Whether a screen area captured with ``options`` takes a few milliseconds at most and
        runs on any thread: an encoder that encodes only the changed bands, unscaled; no file to
        write; no personal data to mask (OCR, and the tree detector asks the event loop from a
        worker thread)."""
        return (
            imaging.normalize_format(options.format) in imaging.BAND_ENCODED
            and options.max_width is None
            and options.save_dir is None
            and not self._observer.masks(options.mask_pii)
        )

    def run(
        self, target: CaptureTarget, options: CaptureOptions, save_file: Path | None = None
    ) -> tuple[ScreenshotMetadata, bytes]:
        """Blocking: run in a worker thread. ``save_file``: also write the full-fidelity image to
        exactly this path (already checked by the path guard), replacing it atomically."""
        fmt = imaging.normalize_format(options.format)
        save_dir = self._security.paths.resolve(options.save_dir) if options.save_dir else None
        now = datetime.now(UTC)
        masks = self._observer.masks(options.mask_pii)
        key = (target, fmt, options.quality, options.max_width, self._settings.max_inline_bytes, masks)
        serial = self._observer.desktop.damage_serial()
        with self._lock:
            cached = self._cache
        # Only screen/region captures: a covered window's own pixels change without root damage.
        reusable = self._settings.reuse_unchanged_captures and target.window is None
        from_cache = reusable and cached is not None and cached[0] == key and cached[1] == serial
        if cached is not None and from_cache:
            encoded = cached[2]
        else:
            encoded = self._encode(target, fmt, options, masks)
            if reusable:
                with self._lock:
                    self._cache = (key, serial, encoded)

        saved_path = None
        if save_dir is not None:
            saved_path = imaging.save_screenshot(encoded.full(), save_dir, encoded.fmt, now)
        elif save_file is not None:
            try:
                save_file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise file_system_error("create", save_file.parent, exc) from exc
            imaging.save_file(save_file, encoded.full())
            saved_path = save_file
        inline = encoded.inline
        metadata = ScreenshotMetadata(
            source=target.source,
            width=inline.width,
            height=inline.height,
            format=inline.format,
            mime_type=imaging.mime_type(inline.format),
            byte_size=len(inline.data),
            quality=inline.quality,
            timestamp=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            region=target.region,
            scale=round(inline.scale, 6),
            origin=Origin(x=target.region.x, y=target.region.y),
            display=target.display,
            window=target.window,
            adjustments=list(inline.steps),
            masked_windows=encoded.masked,
            window_capture=encoded.window_capture,
            pii_masking=encoded.pii,
            saved_path=str(saved_path) if saved_path else None,
            saved_byte_size=len(encoded.full()) if saved_path else None,
            from_cache=from_cache,
        )
        return metadata, inline.data

    def _grab(self, target: CaptureTarget, masks: bool) -> Pixels:
        observation = self._observer.observe(mask_pii=masks)
        if target.window is not None:
            # A blocked window is refused outright (tools.windows.window_target), never masked.
            return observation.window_pixels(target.window, target.include_frame)
        return observation.screen(target.region)

    def _encode(self, target: CaptureTarget, fmt: str, options: CaptureOptions, masks: bool) -> _Encoded:
        pixels = self._grab(target, masks)
        image: imaging.Picture = pixels.frame
        scale = 1.0
        if options.max_width is not None and image.width > options.max_width:
            image, scale = imaging.scale_to_width(pixels.image, options.max_width)
        inline = imaging.fit_inline(image, fmt, options.quality, self._settings.max_inline_bytes)
        if scale != 1.0:
            inline = inline.model_copy(update={"scale": inline.scale * scale})
        return _Encoded(
            stepped_down_image=image if inline.steps else None,
            fmt=fmt,
            quality=options.quality,
            inline=inline,
            masked=pixels.masked_windows,
            window_capture=pixels.window_capture,
            pii=pixels.pii,
        )
