"""subscriptions/listen over the SDK's in-process transport (2026-07-28), over the scripted desktop:
what the acknowledgement honours, and the bound on open streams."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from deskrig import resources
from deskrig.config import Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.serving import build_server

pytestmark = pytest.mark.anyio


async def test_listen_honours_the_state_and_bounds_open_streams(
    world: ScriptedDesktop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "MAX_LISTEN_STREAMS", 1)
    server = build_server(world.open(), Settings())
    try:
        async with Client(server.mcp, mode="2026-07-28") as client:
            async with client.listen(
                resource_subscriptions=["recording://state", "screen://current"], tools_list_changed=True
            ) as subscription:
                assert subscription.honored.resource_subscriptions == ["recording://state"]
                assert not subscription.honored.tools_list_changed
                with pytest.raises(MCPError, match="at most 1 listen stream"):
                    async with client.listen(resource_subscriptions=["recording://state"]):
                        pass
            async with client.listen(resources_list_changed=True) as again:  # the slot is free again
                assert again.honored.resources_list_changed
    finally:
        server.services.desktop.close()
        server.services.security.close()
