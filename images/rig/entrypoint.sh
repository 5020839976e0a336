#!/bin/sh
# Entrypoint of the rig image, run by tini as uid 1000: clear what an earlier run of this
# container left behind, then become `deskrig rig run` serving MCP on 0.0.0.0:$DESKRIG_PORT, on
# the desktop DESKRIG_BACKEND names (the image's ENV: x11, Xvfb + openbox; or sway, headless sway
# with Xwayland), which the rig reads itself.
# The app is the container's CMD, else $DESKRIG_APP, else none (a bare desktop). The rig itself
# checks DESKRIG_SIZE and the app, and exits non-zero with a one-line reason when they are wrong.
set -eu

# After `docker restart` a /tmp that is not a tmpfs still holds the last X server's (Xvfb's, or
# sway's Xwayland's) lock file and socket; their pid may now belong to another process, which
# would make them look alive.
for stale in /tmp/.X[0-9]*-lock /tmp/.X11-unix/X[0-9]*; do
  if [ -e "$stale" ] && ! rm -f "$stale"; then
    echo "deskrig-entrypoint: cannot remove stale $stale" >&2
  fi
done

if [ "$#" -gt 0 ]; then
  set -- -- "$@"
fi
exec deskrig rig run --http "0.0.0.0:${DESKRIG_PORT:-8765}" "$@"
