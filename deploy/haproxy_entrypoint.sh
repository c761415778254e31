#!/bin/sh
# The proxy image's command: HAProxy with deploy/haproxy-compose.cfg, whose sticky-session cookies are
# derived from GLASS_PROXY_COOKIE_KEY, read here from the secret file GLASS_PROXY_COOKIE_KEY_FILE names.
set -eu
file=${GLASS_PROXY_COOKIE_KEY_FILE:?set GLASS_PROXY_COOKIE_KEY_FILE (a secret file)}
if [ ! -s "$file" ]; then
  echo "glass: the secret $file (GLASS_PROXY_COOKIE_KEY_FILE) is missing or empty" >&2
  exit 78
fi
GLASS_PROXY_COOKIE_KEY=$(cat "$file")
export GLASS_PROXY_COOKIE_KEY
exec haproxy -db -f /etc/haproxy/haproxy.cfg
