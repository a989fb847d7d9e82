#!/usr/bin/env bash
# Run DRAKE federations on Flower across machines: one SuperLink, SuperNodes serving clients.
#
#   flower_deploy.sh superlink [HOST:PORT]
#       on the server machine (default 0.0.0.0:9100); keep it running
#   flower_deploy.sh supernode SUPERLINK_HOST:PORT CLIENT_IDS DATA [PORT]
#       on each client machine: serve clients CLIENT_IDS ("0,2,4") of the build in DATA (a copy
#       of the server's: same manifest); PORT is this node's local ClientApp API (default 9094,
#       distinct per node on one machine); keep it running
#   flower_deploy.sh connect NAME SUPERLINK_HOST:PORT
#       where you submit runs (the server machine): add the connection NAME to
#       $FLWR_HOME/config.toml (default ~/.flwr), then
#       drake eval --method fedavg --data DATA --runtime flower --superlink NAME --out OUT
#       (the ServerApp writes OUT on the SuperLink's machine)
#
# Every machine needs `pip install 'drake-pfl[flower]'` (plus the modules named by
# DRAKE_METHOD_MODULES for methods of your own); nothing is installed at run time.
#
# TLS (otherwise --insecure):
#   DRAKE_FLWR_CA=ca.crt DRAKE_FLWR_CERT=server.pem DRAKE_FLWR_KEY=server.key  on the SuperLink
#   DRAKE_FLWR_CA=ca.crt                                    for supernode and connect
# SuperNode authentication (only registered nodes may join):
#   DRAKE_FLWR_NODE_AUTH=1                         on the SuperLink
#   DRAKE_FLWR_NODE_KEY=node_key                   on a SuperNode (node_key.pub beside it), and
#   flwr supernode register node_key.pub NAME      once per node, where you submit runs
set -euo pipefail

tls_server() {
  if [ -n "${DRAKE_FLWR_CERT:-}" ]; then
    echo --ssl-ca-certfile "$DRAKE_FLWR_CA" --ssl-certfile "$DRAKE_FLWR_CERT" \
      --ssl-keyfile "$DRAKE_FLWR_KEY"
  else
    echo --insecure
  fi
}

tls_client() {
  if [ -n "${DRAKE_FLWR_CA:-}" ]; then echo --root-certificates "$DRAKE_FLWR_CA"; else echo --insecure; fi
}

role=${1:-}
case "$role" in
  superlink)
    address=${2:-0.0.0.0:9100}
    auth=()
    [ -n "${DRAKE_FLWR_NODE_AUTH:-}" ] && auth=(--enable-supernode-auth)
    # shellcheck disable=SC2046
    exec flower-superlink $(tls_server) --host "${address%:*}" --port "${address##*:}" \
      --disable-runtime-dependency-installation "${auth[@]}"
    ;;
  supernode)
    [ $# -ge 4 ] || { echo "usage: $0 supernode SUPERLINK_HOST:PORT CLIENT_IDS DATA [PORT]" >&2; exit 2; }
    auth=()
    if [ -n "${DRAKE_FLWR_NODE_KEY:-}" ]; then
      auth=(--auth-supernode-private-key "$DRAKE_FLWR_NODE_KEY"
            --auth-supernode-public-key "$DRAKE_FLWR_NODE_KEY.pub")
    fi
    # shellcheck disable=SC2046
    exec flower-supernode $(tls_client) --superlink "$2" --port "${5:-9094}" \
      --node-config "client-ids='$3' data='$4'" "${auth[@]}"
    ;;
  connect)
    [ $# -eq 3 ] || { echo "usage: $0 connect NAME SUPERLINK_HOST:PORT" >&2; exit 2; }
    home=${FLWR_HOME:-$HOME/.flwr}
    mkdir -p "$home"
    grep -q "^\[superlink\]" "$home/config.toml" 2>/dev/null \
      || printf '[superlink]\ndefault = "%s"\n' "$2" >> "$home/config.toml"
    if grep -q "^\[superlink\.$2\]" "$home/config.toml"; then
      echo "$home/config.toml already has [superlink.$2]; edit it there" >&2; exit 2
    fi
    if [ -n "${DRAKE_FLWR_CA:-}" ]; then
      security="root-certificates = \"$DRAKE_FLWR_CA\""
    else
      security="insecure = true"
    fi
    printf '\n[superlink.%s]\naddress = "%s"\n%s\n' "$2" "$3" "$security" >> "$home/config.toml"
    echo "added [superlink.$2] to $home/config.toml"
    ;;
  *)
    sed -n '2,27p' "$0" >&2
    exit 2
    ;;
esac
