#!/usr/bin/env sh
# Install WordNet 3.0 for METEOR (Debian packages wordnet-base and wordnet-sense-index) when
# /usr/share/wordnet is missing. The tests then build their own NLTK data folder from it;
# users run `drake setup-metrics` once to build ~/.cache/drake/nltk_data.
set -eu

if [ -f /usr/share/wordnet/data.noun ] && [ -f /usr/share/wordnet/index.sense ]; then
    echo "WordNet already installed in /usr/share/wordnet"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    wordnet-base wordnet-sense-index

test -f /usr/share/wordnet/data.noun
echo "WordNet installed in /usr/share/wordnet"
