"""The AX reader on a real Mac: the Tk scene's windows read through AXUIElement
(deskrig.desktop.macos_ax_native) and mapped to deskrig's elements (deskrig.a11y.macos_ax), then an
element action (AXRaise) performed through its reference. Real host only, like the contract suite."""

from __future__ import annotations

from tests.polling import poll

from .conftest import ON_MACOS, NativeScene

pytestmark = ON_MACOS


def test_a_tk_window_reads_as_a_frame_at_its_quartz_frame(native_scene: NativeScene) -> None:
    from deskrig.a11y.macos_ax import ax_action, child_indices, elements
    from deskrig.desktop.macos import MacOSBackend
    from deskrig.desktop.macos_ax_native import perform, read_tree
    from deskrig.desktop.macos_quartz import QuartzSession

    backend = MacOSBackend(QuartzSession())
    try:
        for kind, app in native_scene.apps.items():
            listed = poll(
                f"the {kind} window listed",
                lambda app=app: next((w for w in backend.windows() if w.pid == app.pid), None),
            )
            tree = elements(read_tree(app.pid), app.pid)
            frames = [e for e in tree if e.role == "frame" and e.name == f"{kind}-native"]
            assert len(frames) == 1, [(e.role, e.name) for e in tree]
            assert frames[0].bounds == listed.frame_bounds
            perform(app.pid, child_indices(frames[0].ref), ax_action(frames[0], "raise"))
            poll(f"the {kind} window on top", lambda app=app: backend.windows()[0].pid == app.pid)
    finally:
        backend.close()
