#!/bin/bash
# HEALTHCHECK of the rig image: healthy when GET /readyz answers 200 (the desktop, Xvfb + window
# manager or sway, and the app are up). Plain bash over /dev/tcp: no curl in the image, and no
# Python start-up every tick.
#
# Each probe is a `docker exec`, which costs the rig about 8 ms of CPU whatever it runs: every 2 s,
# that was nine tenths of what an idle rig burnt. So once a probe of this boot of the container has
# found the rig ready, the next ones hold: each keeps asking /readyz every 5 s (no new process)
# for up to a minute, and fails as soon as an answer is not 200. The first ready answer returns at
# once, so `depends_on: condition: service_healthy` waits no longer than before. The HEALTHCHECK's
# timeout must be over the hold. Without a writable /tmp a probe never holds.
set -u
port="${DESKRIG_PORT:-8765}"
HOLD_S=60
ASK_EVERY_S=5
MARKER=/tmp/deskrig-healthy    # holds PID 1's start time: a restarted container's differs
TICK=/tmp/deskrig-health-tick  # a FIFO nobody writes: `read -t` on it sleeps without a process

ready() {
    local status=""
    exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
    printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$port" >&3
    IFS=' ' read -r -t 3 _ status _ <&3
    exec 3<&-
    [[ $status == 200 ]]
}

ready || exit 1
read -r -a pid1 </proc/1/stat
boot="${pid1[21]}"
seen=""
read -r seen 2>/dev/null <"$MARKER"
if [[ $seen != "$boot" ]]; then
    { [[ -p $TICK ]] || mkfifo "$TICK"; } 2>/dev/null && printf '%s\n' "$boot" 2>/dev/null >"$MARKER"
    exit 0
fi
exec 4<>"$TICK" || exit 0
for ((held = 0; held < HOLD_S; held += ASK_EVERY_S)); do
    read -r -t "$ASK_EVERY_S" -u 4 _
    ready || exit 1
done
exit 0
