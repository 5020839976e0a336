#!/bin/bash
# HEALTHCHECK of the rig image: healthy when GET /readyz answers 200 (the desktop, Xvfb + window
# manager or sway, and the app are up). Plain bash over /dev/tcp: no curl in the image, and no
# Python start-up every tick.
set -u
port="${DESKRIG_PORT:-8765}"
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$port" >&3
IFS=' ' read -r -t 3 _ status _ <&3 || exit 1
[[ $status == 200 ]]
