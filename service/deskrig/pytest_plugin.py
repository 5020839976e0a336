"""pytest plugin: the ``deskrig_rig`` fixture (being written)."""
