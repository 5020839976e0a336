"""Trajectory recording: a turn folder for every action, video that survives a crash, a live feed.

- :mod:`~deskrig.recording.turns`: what a turn folder holds and how it is written atomically;
- :mod:`~deskrig.recording.moments`: capturing a target's screenshot and accessibility state;
- :mod:`~deskrig.recording.video`: the observed screen, through ffmpeg, to a fragmented mp4;
- :mod:`~deskrig.recording.session`: one recording (folder, writer thread, video, events);
- :mod:`~deskrig.recording.registry`: the boot and per-session recordings, and the action observer;
- :mod:`~deskrig.recording.watch`: ending a session's recording when its client disconnects;
- :mod:`~deskrig.feed` (beside the HTTP face, above this package): the orchestrator's HTTP routes (events, files, status);
- :mod:`~deskrig.recording.replay`: re-running a recorded trajectory.

Nothing is imported here: ``deskrig view`` reads turn folders through :mod:`~deskrig.recording.turns`
alone, without the recorder's accessibility and capture machinery (half a second of imports).
"""
