#!/bin/sh
# The redis image's command: Redis as serving/redis_conf.py configures it (the app's default user and the
# queue workers' own user, glass-worker; a memory ceiling with noeviction; an append-only file in /data,
# a named volume, so classes and queued runs outlive a restart). The passwords come from the secret files
# named by GLASS_REDIS_PASSWORD_FILE and GLASS_REDIS_WORKER_PASSWORD_FILE; the config travels on
# redis-server's standard input, so they are in no file and on no command line.
set -eu
conf=$(python3 -m serving.redis_conf --bind 0.0.0.0 --port 6379 --data-dir /data)
exec redis-server - <<CONF
$conf
CONF
