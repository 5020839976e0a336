"""deskrig: a headless GUI test rig for AI agents.

A rig is one virtual desktop running one target application, plus an MCP server that lets an
agent see and drive that desktop.
"""

__version__ = "0.1.0"
