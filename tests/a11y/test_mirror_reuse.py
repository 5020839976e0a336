"""What the live mirror hands out cannot change, and stays the same objects while unchanged.

Readers keep what they made of an element by its identity (the recorder's state files serialise
only the elements the previous one did not hold): an element changed in place would go unseen, and
a tree fetched again should hand out the objects of the elements that did not change. On every
desktop backend, with the form of every toolkit with an AT-SPI bridge."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pydantic
import pytest
from tests.toolkits import Capability, needs

from deskrig.a11y import AccessibilityClient, Element, ElementQuery, Snapshot
from deskrig.a11y.access import A11yAccess
from deskrig.a11y.events import ObjectEvent
from deskrig.a11y.source import AccessibilitySource
from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop import Desktop
from deskrig.identity import ClientRef
from deskrig.serving import build_server
from deskrig.tools import CallInfo

from .conftest import A11yDesktop, FormApp

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]

pytestmark = needs(Capability.A11Y_TREE)

_IMMUTABLE_SCALARS = (str, int, float, bool, type(None))


@pytest.fixture(scope="module")
def a11y_desktop(backend: str, a11y_desktops: Callable[[str], A11yDesktop]) -> A11yDesktop:
    """This module runs on every desktop backend."""
    return a11y_desktops(backend)


def mutable_parts(value: object, where: str) -> list[str]:
    """Where in ``value`` something could be changed in place: a container other than a tuple,
    or a model that is not frozen."""
    if isinstance(value, _IMMUTABLE_SCALARS):
        return []
    if isinstance(value, tuple):  # named tuples too (ElementRef, PathStep)
        return [part for i, item in enumerate(value) for part in mutable_parts(item, f"{where}[{i}]")]
    if isinstance(value, pydantic.BaseModel):
        own = [] if value.model_config.get("frozen") else [f"{where} (a model that is not frozen)"]
        fields = [(name, getattr(value, name)) for name in type(value).model_fields]
        return own + [part for name, field in fields for part in mutable_parts(field, f"{where}.{name}")]
    return [f"{where} ({type(value).__name__})"]


def shared(before: Snapshot, after: Snapshot) -> int:
    """How many of ``after``'s element objects ``before`` held."""
    held = {id(e) for e in before.elements}
    return sum(id(e) in held for e in after.elements)


def test_no_element_a_snapshot_hands_out_can_be_changed_in_place(
    run: Run[Any], client: AccessibilityClient, form: FormApp
) -> None:
    """Every field of every element, and everything in it, is immutable; and the list of elements
    the PII masker's read gets is its own (it was the mirror's tree: clearing it emptied the next
    snapshot)."""
    snapshot = run(client.snapshot(form.pid))
    assert [part for e in snapshot.elements for part in mutable_parts(e, f"[{e.index}]")] == []
    element = snapshot.elements[-1]
    for field in Element.model_fields:
        with pytest.raises(pydantic.ValidationError, match="frozen"):
            setattr(element, field, getattr(snapshot.elements[0], field))
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        snapshot.elements = []  # type: ignore[misc]

    run(client.current_elements(form.pid)).clear()
    again = run(client.snapshot(form.pid))
    assert again.source == "mirror" and len(again.elements) == len(snapshot.elements)


def test_a_whole_fetch_keeps_the_elements_that_did_not_change(
    run: Run[Any], client: AccessibilityClient, form: FormApp
) -> None:
    """A refresh fetches the tree whole: its elements that equal those served before are those
    objects (it made all of them anew). The form does not change by itself, so that is all of them."""
    before = run(client.snapshot(form.pid))
    after = run(client.snapshot(form.pid, refresh=True))
    assert after.source == "fetch"
    assert after.elements == before.elements
    assert shared(before, after) == len(after.elements)


def test_a_subtree_fetched_again_keeps_the_elements_that_did_not_change(
    run: Run[Any], client: AccessibilityClient, form: FormApp
) -> None:
    """A subtree the events say changed shape is fetched again and spliced in; where nothing in it
    changed, its elements are the objects served before (they were all new copies)."""
    before = run(client.snapshot(form.pid))
    mirror = client.mirror(before.bus_name)
    assert mirror is not None
    parent = next(e for e in before.elements if e.depth >= 2 and e.child_count > 0 and e.bounds is not None)
    mirror.note(ObjectEvent(parent.ref.bus_name, parent.ref.path, "ChildrenChanged", "add", time.monotonic()))
    after = run(client.snapshot(form.pid))
    assert after.source == "mirror", "the subtree was fetched again and spliced in"
    assert after.elements == before.elements
    assert shared(before, after) == len(after.elements)


def test_get_app_state_dumps_and_renders_only_the_elements_its_last_state_did_not_hold(
    run: Run[Any],
    client: AccessibilityClient,
    form: FormApp,
    desktop: Desktop,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tool keeps each element's JSON and line of its last state, by the element object: after
    a change only the elements the mirror replaced are rendered again, and dumped again when the
    elements are asked for (an answer without them dumps none); its structured content is still the
    state's whole dump, field for field and in the model's order."""

    async def connected() -> AccessibilitySource:
        return client

    server = build_server(desktop, Settings(security=SecurityPolicy()), a11y=A11yAccess(connected))
    spec = server.tools["get_app_state"]
    rendered: list[Element] = []
    dumped: list[Element] = []
    render_line, model_dump = Element.render_line, Element.model_dump

    def counted_line(element: Element) -> str:
        rendered.append(element)
        return render_line(element)

    def counted_dump(element: Element, **options: Any) -> dict[str, Any]:
        dumped.append(element)
        return model_dump(element, **options)

    monkeypatch.setattr(Element, "render_line", counted_line)
    monkeypatch.setattr(Element, "model_dump", counted_dump)

    def state(include_elements: bool) -> tuple[dict[str, Any], Snapshot]:
        arguments = spec.input_model.model_validate({"pid": form.pid, "include_elements": include_elements})
        rendered.clear()
        dumped.clear()
        result = run(spec.handler(server.services, CallInfo(ClientRef("test")), arguments))
        whole = result.structured.model_dump(mode="json", exclude=None if include_elements else {"elements"})
        assert result.structured_data == whole and list(result.structured_data) == list(whole)
        return result.structured_data, client.snapshots.get(whole["snapshot_id"])

    _, before = state(include_elements=True)
    count = len(form.events("button")) + 1
    run(client.element_action(before.resolve(ElementQuery(role="push button", name="Click me")), "click"))
    form.wait_for_event("button", lambda e: e["count"] == count)
    lean, after = state(include_elements=False)
    changed = len(after.elements) - shared(before, after)
    assert 0 < len(rendered) == changed < len(after.elements)
    assert dumped == [] and "elements" not in lean
    assert f'label "clicked {count}"' in lean["text"]
    data, again = state(include_elements=True)
    assert again.elements == after.elements and rendered == []
    assert len(dumped) == changed, "dumped: the elements the last answer with elements did not hold"
    assert data["text"] == lean["text"].replace(after.snapshot_id, again.snapshot_id)
    assert [e["name"] for e in data["elements"]] == [e.name for e in after.elements]
