#!/bin/sh
# The compose stack's first start: the fleet key and the reviewer key, and a first reviewer
# for the UI, in the volume mounted at /keys. Whatever is there already is kept, so restarts
# change nothing (and the token below is printed only the first time).
set -eu

if [ ! -e /keys/fleet.key ]; then
    airlock keys generate --out /keys
fi

if [ ! -e /keys/reviewers.yaml ]; then
    echo "The first reviewer's token (sign in at http://localhost:8080); it is stored nowhere:"
    airlock reviewer add-token --tokens /keys/reviewers.yaml --name "${AIRLOCK_FIRST_REVIEWER:-admin}" --pools '*'
fi
