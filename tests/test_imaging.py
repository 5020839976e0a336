"""imaging: real encodes decoded back with Pillow, real files on disk."""

from __future__ import annotations

import io
import random
import threading
from datetime import datetime
from pathlib import Path

import pytest
from PIL import Image
from tests.frames import BLUE, PANEL, bgrx_frame, desktop_like

from deskrig import imaging, turbojpeg
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.grabs import Grab
from deskrig.model import Bounds


def noise(width: int, height: int, seed: int = 1) -> Image.Image:
    return Image.frombytes("RGB", (width, height), random.Random(seed).randbytes(width * height * 3))


def decode(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def png_pixels(data: bytes) -> tuple[str | None, tuple[int, int], bytes]:
    """What a PNG shows: two encodings of the same picture are compared by this, not byte for byte:
    ISA-L's deflate does not promise the same bytes for the same rows (intel/isa-l#140), and a CI
    run once saw two encodings of one picture differ."""
    image = decode(data)
    return image.format, image.size, image.convert("RGB").tobytes()


def close_to(actual: tuple[int, ...], expected: tuple[int, ...], tolerance: int = 12) -> bool:
    return all(abs(a - e) <= tolerance for a, e in zip(actual, expected, strict=True))


# --- encode -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["png", "bmp"])
def test_lossless_formats_round_trip_every_pixel(fmt: str) -> None:
    image = desktop_like()
    back = decode(imaging.encode(image, fmt))
    assert back.format == fmt.upper()
    assert back.size == image.size
    assert back.convert("RGB").tobytes() == image.tobytes()


@pytest.mark.parametrize("mode", ["RGBA", "L"])
def test_png_keeps_alpha_and_grey_exactly(mode: str) -> None:
    image = desktop_like(64, 48).convert(mode)
    if mode == "RGBA":
        image.putpixel((3, 4), (10, 20, 30, 40))
    back = decode(imaging.encode(image, "png"))
    assert back.mode == mode
    assert back.tobytes() == image.tobytes()


def test_png_from_palette_image_is_lossless() -> None:
    image = desktop_like(64, 48).convert("P")
    back = decode(imaging.encode(image, "png"))
    assert back.convert("RGB").tobytes() == image.convert("RGB").tobytes()


@pytest.mark.parametrize("fmt", ["jpeg", "webp"])
def test_lossy_formats_keep_size_and_colours(fmt: str) -> None:
    image = desktop_like()
    back = decode(imaging.encode(image, fmt, 80)).convert("RGB")
    assert back.size == image.size
    assert close_to(back.getpixel((120, 70)), BLUE)
    assert close_to(back.getpixel((300, 30)), PANEL)


def test_quality_changes_lossy_size_and_not_png() -> None:
    image = desktop_like()
    assert len(imaging.encode(image, "jpeg", 20)) < len(imaging.encode(image, "jpeg", 95))
    assert png_pixels(imaging.encode(image, "png", 5)) == png_pixels(imaging.encode(image, "png"))


def test_jpeg_of_rgba_drops_alpha() -> None:
    image = desktop_like(64, 48).convert("RGBA")
    assert decode(imaging.encode(image, "jpeg")).mode == "RGB"


def test_format_names_are_case_insensitive_and_jpg_means_jpeg() -> None:
    assert decode(imaging.encode(desktop_like(64, 48), "JPG")).format == "JPEG"
    assert imaging.mime_type("jpeg") == "image/jpeg"
    assert imaging.mime_type("png") == "image/png"
    assert imaging.mime_type("webp") == "image/webp"
    assert imaging.mime_type("bmp") == "image/bmp"


def test_unknown_format_is_unsupported() -> None:
    with pytest.raises(DeskrigError) as caught:
        imaging.encode(desktop_like(64, 48), "gif")
    assert caught.value.code is ErrorCode.UNSUPPORTED_FORMAT
    assert caught.value.details == {"format": "gif", "supported": ["png", "jpeg", "webp", "bmp"]}


@pytest.mark.parametrize("quality", [0, 101, -5, True])
def test_quality_outside_1_to_100_is_invalid(quality: int) -> None:
    with pytest.raises(DeskrigError) as caught:
        imaging.encode(desktop_like(64, 48), "jpeg", quality)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.details is not None
    assert caught.value.details["argument"] == "quality"


def test_pillow_failure_is_encoding_failed() -> None:
    with pytest.raises(DeskrigError) as caught:
        imaging.encode(Image.new("RGB", (20000, 2)), "webp")
    assert caught.value.code is ErrorCode.ENCODING_FAILED
    assert isinstance(caught.value.__cause__, ValueError | OSError)


# --- scale ------------------------------------------------------------------------------------


def test_scale_never_upscales() -> None:
    image = desktop_like()
    scaled, scale = imaging.scale_to_width(image, 4000)
    assert scaled is image
    assert scale == 1.0


@pytest.mark.parametrize(("max_width", "size"), [(320, (320, 200)), (500, (500, 312)), (160, (160, 100))])
def test_scale_to_width_keeps_aspect_and_colours(max_width: int, size: tuple[int, int]) -> None:
    image = desktop_like()
    scaled, scale = imaging.scale_to_width(image, max_width)
    assert scaled.size == size
    assert scale == max_width / 640
    # The middle of the blue button, mapped through the scale factor, is still blue.
    assert close_to(scaled.getpixel((int(120 * scale), int(70 * scale))), BLUE, 4)


def test_scale_to_width_rejects_non_positive_widths() -> None:
    with pytest.raises(DeskrigError) as caught:
        imaging.scale_to_width(desktop_like(), 0)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


# --- fit_inline -------------------------------------------------------------------------------


def test_fit_inline_changes_nothing_when_the_first_encoding_fits() -> None:
    image = desktop_like()
    fitted = imaging.fit_inline(image, "png", None, 1 << 20)
    assert fitted.steps == []
    assert png_pixels(fitted.data) == ("PNG", image.size, image.tobytes())
    assert (fitted.format, fitted.quality, fitted.scale) == ("png", None, 1.0)
    assert (fitted.width, fitted.height) == image.size
    assert fitted.mime_type == "image/png"


def test_fit_inline_lowers_jpeg_quality_first() -> None:
    image = noise(1920, 1080)
    fitted = imaging.fit_inline(image, "png", None, 1 << 20)
    assert len(fitted.data) <= 1 << 20
    assert fitted.format == "jpeg"
    assert fitted.quality in imaging.FALLBACK_QUALITIES
    assert fitted.scale == 1.0
    assert len(fitted.steps) == 1
    assert fitted.steps[0].startswith(f"re-encoded as jpeg q={fitted.quality} (png was ")
    assert "> 1 MiB limit" in fitted.steps[0]
    back = decode(fitted.data)
    assert (back.format, back.size) == ("JPEG", (1920, 1080))


def test_fit_inline_scales_when_quality_is_not_enough() -> None:
    image = noise(1920, 1080)
    limit = 300 * 1024
    fitted = imaging.fit_inline(image, "webp", 90, limit)
    assert len(fitted.data) <= limit
    assert (fitted.format, fitted.quality) == ("jpeg", 35)
    assert fitted.scale in imaging.FALLBACK_SCALES
    assert fitted.steps[0].startswith("re-encoded as jpeg q=35 (webp q=90 was ")
    assert fitted.steps[1].startswith(f"scaled to {fitted.scale:g} ({fitted.width}x{fitted.height}")
    back = decode(fitted.data)
    expected = (round(1920 * fitted.scale), round(1080 * fitted.scale))
    assert back.size == (fitted.width, fitted.height) == expected


def test_fit_inline_keeps_a_low_jpeg_quality_and_only_scales() -> None:
    fitted = imaging.fit_inline(noise(800, 600), "jpeg", 30, 100 * 1024)
    assert fitted.quality == 30
    assert len(fitted.steps) == 1
    assert fitted.steps[0].startswith("scaled to ")


def test_fit_inline_that_cannot_fit_reports_the_smallest_size() -> None:
    with pytest.raises(DeskrigError) as caught:
        imaging.fit_inline(noise(400, 300), "png", None, 200)
    error = caught.value
    assert error.code is ErrorCode.OUT_OF_MEMORY
    assert error.details is not None
    assert error.details["max_bytes"] == 200
    assert error.details["smallest_bytes"] > 200
    assert error.details["smallest_scale"] == imaging.FALLBACK_SCALES[-1]


# --- black_out and click marker --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["bgrx", "image"])
def test_black_out_paints_only_the_overlap_in_image_coordinates(kind: str) -> None:
    image = Image.new("RGB", (200, 100), PANEL)
    frame = bgrx_frame(image) if kind == "bgrx" else Grab.of(image)
    origin = (100, 50)  # the image shows screen pixels x 100..299, y 50..149
    blocked = [Bounds(x=250, y=120, width=100, height=100), Bounds(x=0, y=0, width=50, height=50)]
    masked = imaging.black_out(frame, blocked, origin).image()
    assert masked.getpixel((150, 70)) == (0, 0, 0)  # screen (250, 120): the overlap's corner
    assert masked.getpixel((199, 99)) == (0, 0, 0)
    assert masked.getpixel((149, 70)) == PANEL  # one pixel left of the overlap
    assert masked.getpixel((150, 69)) == PANEL  # one pixel above it
    assert masked.getpixel((0, 0)) == PANEL  # the second rect is off the image
    assert frame.image().getpixel((199, 99)) == PANEL  # the input is untouched
    png = decode(imaging.encode(imaging.black_out(frame, blocked, origin), "png"))
    assert png.tobytes() == masked.tobytes()


def test_black_out_without_overlap_returns_the_input() -> None:
    frame = Grab.of(Image.new("RGBA", (50, 50), (*PANEL, 255)))
    assert imaging.black_out(frame, [Bounds(x=500, y=500, width=5, height=5)], (0, 0)) is frame
    masked = imaging.black_out(frame, [Bounds(x=0, y=0, width=5, height=5)], (0, 0))
    assert masked.image().getpixel((2, 2)) == (0, 0, 0, 255)


# --- frames as grabbed: BGRX straight into the encoders ----------------------------------------


@pytest.mark.parametrize("size", [(1, 1), (3, 5), (17, 9), (641, 3), (640, 400)])
def test_png_of_a_bgrx_frame_is_every_pixel_of_the_grab(size: tuple[int, int]) -> None:
    image = noise(*size) if size != (640, 400) else desktop_like()
    frame = bgrx_frame(image)
    back = decode(imaging.encode(frame, "png"))
    assert (back.format, back.mode, back.size) == ("PNG", "RGB", size)
    assert back.tobytes() == image.tobytes()
    assert frame.image().tobytes() == image.tobytes()


def test_png_and_jpeg_read_the_bgrx_rows_without_an_rgb_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = bgrx_frame(desktop_like(64, 48))

    def no_conversion(self: Grab) -> Image.Image:
        raise AssertionError("the encoder converted the frame to a Pillow RGB image")

    monkeypatch.setattr(Grab, "image", no_conversion)
    assert decode(imaging.encode(frame, "png")).size == (64, 48)
    assert decode(imaging.encode(frame, "jpeg")).size == (64, 48)


def test_jpeg_of_a_bgrx_frame_is_what_pillow_makes_of_the_same_pixels() -> None:
    image = desktop_like()
    for quality in (35, 80):
        from_frame = imaging.encode(bgrx_frame(image), "jpeg", quality)
        from_pillow = imaging.encode(image, "jpeg", quality)
        back = decode(from_frame)
        assert (back.format, back.mode, back.size) == ("JPEG", "RGB", image.size)
        # Same libjpeg-turbo, quality and 4:2:0 chroma: the same size and colours as before.
        assert abs(len(from_frame) - len(from_pillow)) < len(from_pillow) * 0.03
        assert close_to(back.getpixel((100, 60)), BLUE)
        assert close_to(back.getpixel((300, 30)), PANEL)
    assert len(imaging.encode(bgrx_frame(image), "jpeg", 30)) < len(
        imaging.encode(bgrx_frame(image), "jpeg", 90)
    )


def test_jpeg_of_a_bgrx_frame_without_libturbojpeg_goes_through_pillow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    image = desktop_like()
    with_library = imaging.encode(bgrx_frame(image), "jpeg", 80)
    monkeypatch.setattr(turbojpeg, "available", lambda: False)
    without_library = imaging.encode(bgrx_frame(image), "jpeg", 80)
    assert abs(len(with_library) - len(without_library)) < len(with_library) * 0.03
    back = decode(without_library)
    assert close_to(back.getpixel((100, 60)), BLUE)
    assert close_to(back.getpixel((300, 30)), PANEL)


def test_libturbojpeg_is_found_on_this_machine() -> None:
    # scripts/setup and the rig image install it; without it JPEG silently takes the slower path.
    assert turbojpeg.available()


def test_fit_inline_steps_a_bgrx_frame_down_like_an_image() -> None:
    image = noise(400, 300)
    frame = bgrx_frame(image)
    from_frame = imaging.fit_inline(frame, "png", None, 60_000)
    from_image = imaging.fit_inline(image, "png", None, 60_000)
    assert (from_frame.format, from_frame.quality, from_frame.scale) == (
        from_image.format,
        from_image.quality,
        from_image.scale,
    )
    assert len(from_frame.data) <= 60_000


@pytest.mark.parametrize("fmt", ["webp", "bmp"])
def test_other_formats_of_a_bgrx_frame_go_through_pillow(fmt: str) -> None:
    image = noise(33, 7)
    back = decode(imaging.encode(bgrx_frame(image), fmt))
    assert back.size == image.size
    if fmt == "bmp":
        assert back.convert("RGB").tobytes() == image.tobytes()


def test_a_frame_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="not 4x4 BGRX"):
        Grab.from_bgrx(bytes(15), 4, 4)


def test_click_marker_is_pure_red_at_the_click_point() -> None:
    image = Image.new("RGB", (200, 100), PANEL)
    marked = imaging.draw_click_marker(image, 120, 40)
    red = (255, 0, 0)
    assert marked.getpixel((120, 40)) == red
    assert marked.getpixel((120 + imaging.MARKER_RADIUS, 40)) == red  # the ring
    assert marked.getpixel((120, 40 - imaging.MARKER_RADIUS)) == red
    assert marked.getpixel((60, 40)) == PANEL
    assert image.getpixel((120, 40)) == PANEL


def test_click_marker_on_grey_and_at_the_edge() -> None:
    marked = imaging.draw_click_marker(Image.new("L", (30, 30), 128), 0, 29)
    assert marked.mode == "RGB"
    assert marked.getpixel((0, 29)) == (255, 0, 0)


# --- files ------------------------------------------------------------------------------------

NOW = datetime(2024, 3, 9, 14, 5, 7, 42_999)


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


def test_save_screenshot_writes_the_dated_file(tmp_path: Path) -> None:
    data = imaging.encode(desktop_like(64, 48), "png")
    path = imaging.save_screenshot(data, tmp_path / "shots", "png", NOW)
    assert path == tmp_path / "shots" / "2024-03-09" / "20240309_140507_042.png"
    assert path.is_absolute()
    assert path.read_bytes() == data
    assert leftovers(path.parent) == []


def test_jpeg_files_get_the_jpg_extension(tmp_path: Path) -> None:
    path = imaging.save_screenshot(b"jpeg bytes", tmp_path, "jpeg", NOW)
    assert path.name == "20240309_140507_042.jpg"


def test_same_millisecond_saves_never_overwrite(tmp_path: Path) -> None:
    first = imaging.save_screenshot(b"first", tmp_path, "png", NOW)
    second = imaging.save_screenshot(b"second", tmp_path, "png", NOW)
    assert second.name == "20240309_140507_042_1.png"
    assert (first.read_bytes(), second.read_bytes()) == (b"first", b"second")


def test_an_existing_file_is_left_untouched(tmp_path: Path) -> None:
    taken = tmp_path / "2024-03-09" / "20240309_140507_042.webp"
    taken.parent.mkdir()
    taken.write_bytes(b"somebody else's")
    path = imaging.save_screenshot(b"mine", tmp_path, "webp", NOW)
    assert path.name == "20240309_140507_042_1.webp"
    assert taken.read_bytes() == b"somebody else's"


def test_concurrent_writers_in_one_millisecond_get_distinct_files(tmp_path: Path) -> None:
    writers = 8
    barrier = threading.Barrier(writers)
    paths: list[Path] = []

    def save(index: int) -> None:
        barrier.wait()
        paths.append(imaging.save_screenshot(f"payload {index}".encode(), tmp_path, "bmp", NOW))

    threads = [threading.Thread(target=save, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(paths)) == writers
    assert sorted(p.read_bytes() for p in paths) == sorted(f"payload {i}".encode() for i in range(writers))
    assert leftovers(tmp_path / "2024-03-09") == []


def test_unwritable_save_dir_is_a_file_system_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"x")
    with pytest.raises(DeskrigError) as caught:
        imaging.save_screenshot(b"data", not_a_dir, "png", NOW)
    assert caught.value.code is ErrorCode.FILE_SYSTEM_ERROR
    assert caught.value.details is not None
    assert caught.value.details["errno"] is not None
    assert str(not_a_dir) in caught.value.details["path"]


def test_save_file_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    imaging.save_file(target, b'{"v": 1}')
    imaging.save_file(target, b'{"v": 2}')
    assert target.read_bytes() == b'{"v": 2}'
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_save_file_into_a_missing_folder_is_a_file_system_error(tmp_path: Path) -> None:
    with pytest.raises(DeskrigError) as caught:
        imaging.save_file(tmp_path / "missing" / "x.json", b"{}")
    assert caught.value.code is ErrorCode.FILE_SYSTEM_ERROR
