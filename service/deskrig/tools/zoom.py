"""zoom: a region of the screen enlarged, for reading small text.

Read through the one observation path (blocked windows blacked out, as in every screenshot);
the metadata's scale and origin map image pixels back to screen pixels like a screenshot's.
"""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
from PIL import Image
from pydantic import Field

from deskrig import imaging
from deskrig.capture import Origin, ScreenshotMetadata
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds
from deskrig.services import AnyTool, CallInfo, ImagePart, Services, ToolResult, ToolSpec
from deskrig.tools.screen import RegionArguments, region_target

MAX_SCALE = 8.0
#: Largest zoomed image, in pixels a side: beyond it a zoom is a screenshot of a bigger region.
MAX_ZOOMED_SIDE = 4096


class ZoomInput(RegionArguments):
    scale: float = Field(2.0, gt=1.0, le=MAX_SCALE, description="Enlargement factor, > 1 and at most 8")


def zoomed(services: Services, args: ZoomInput) -> tuple[ScreenshotMetadata, bytes]:
    """Blocking: the redacted region, enlarged and encoded as PNG (stepped down to fit inline)."""
    region: Bounds = region_target(services, args.x, args.y, args.width, args.height).region
    size = (round(region.width * args.scale), round(region.height * args.scale))
    if max(size) > MAX_ZOOMED_SIDE:
        raise DeskrigError(
            ErrorCode.INVALID_REGION,
            f"the zoomed image would be {size[0]}x{size[1]} pixels, more than {MAX_ZOOMED_SIDE} a side",
            details={"region": region.model_dump(), "scale": args.scale},
            remediation="Zoom into a smaller region or with a smaller scale.",
        )
    now = datetime.now(UTC)
    pixels = services.observer.observe().screen(region)
    enlarged = pixels.image.resize(size, Image.Resampling.LANCZOS)
    inline = imaging.fit_inline(enlarged, "png", None, services.settings.max_inline_bytes)
    metadata = ScreenshotMetadata(
        source="zoom",
        width=inline.width,
        height=inline.height,
        format=inline.format,
        mime_type=inline.mime_type,
        byte_size=len(inline.data),
        quality=inline.quality,
        timestamp=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        region=region,
        scale=round(inline.width / region.width, 6),
        origin=Origin(x=region.x, y=region.y),
        adjustments=list(inline.steps),
        masked_windows=pixels.masked_windows,
    )
    return metadata, inline.data


async def zoom(services: Services, call: CallInfo, args: ZoomInput) -> ToolResult:
    metadata, data = await anyio.to_thread.run_sync(zoomed, services, args)
    return ToolResult(metadata, images=[ImagePart(data, metadata.mime_type)])


TOOLS: list[AnyTool] = [
    ToolSpec(
        "zoom",
        "A region of the screen enlarged (scale > 1) for reading small text. metadata.scale and "
        "metadata.origin map image pixels back: screen_x = origin.x + image_x / scale.",
        ZoomInput,
        ScreenshotMetadata,
        zoom,
        captures=True,
        title="Zoom into a region",
    ),
]
