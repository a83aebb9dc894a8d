#!/usr/bin/env bash
# The dashboard's end-to-end test drives a real headless Chromium through Playwright. The
# browser is Debian's own package (/usr/bin/chromium), never one a test tool downloads:
# Playwright's browser download reaches hosts these machines cannot. Installed once, by set-up.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install_browser: no chromium and no apt-get; install Chromium and put it on PATH (the dashboard test needs it)" >&2
	exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -qq chromium >/dev/null 2>&1 || {
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq chromium
}
command -v chromium >/dev/null
