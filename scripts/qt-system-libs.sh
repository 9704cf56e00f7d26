#!/usr/bin/env bash
# The Qt xcb platform (a real window) needs a few system libraries that minimal Linux
# images lack. Install the missing ones when we may (root + apt-get), else say which.
set -uo pipefail
pkgs=(libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
      libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0
      libxkbcommon0 libegl1 libgl1 libfontconfig1 libdbus-1-3)
command -v dpkg-query >/dev/null || exit 0
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "serve-console: installing Qt system libraries: ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "serve-console: Qt may need: sudo apt-get install ${missing[*]}" >&2
fi
