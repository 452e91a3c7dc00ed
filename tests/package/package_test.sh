#!/usr/bin/env bash
# package_test.sh - the Debian packages end to end: built from a clean copy of
# the tree (scripts/package.sh: dpkg-buildpackage, lintian without errors),
# installed with apt-get, checked by the autopkgtest scripts of debian/tests
# (the README's conn.c through pkg-config, a find_package(uslab) project, a
# program under LD_PRELOAD=libuslab.so.0 served by uslab, the tools), then
# purged, with nothing of theirs left behind. Skipped (exit 77, with the
# reason) where it cannot run: no packaging tools, no root or password-less
# sudo, or the packages already installed (it would replace and remove them).
# Usage: package_test.sh SOURCE_DIR
set -uo pipefail
root=$1
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
for t in dpkg-buildpackage dh apt-get dpkg-deb; do
  command -v $t >/dev/null || skip "$t is not installed (scripts/deps.sh test installs the packaging tools)"
done
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  skip "installing packages needs root or password-less sudo"
fi
pkgs="libuslab0 libuslab-dev uslab-tools"
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" &&
    skip "$p is installed on this machine; the test would replace it and then remove it"
done
# debian/changelog's upstream version is the project's (CMakeLists.txt).
project=$(sed -n 's/^project(uslab VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
deb=$(cd "$root" && dpkg-parsechangelog -S Version)
[ "${deb%-*}" = "$project" ] || fail "debian/changelog says $deb, CMakeLists.txt $project"
out=$(mktemp -d)
trap '$SUDO apt-get purge -y -q $pkgs >/dev/null 2>&1; rm -rf "$out"' EXIT
USLAB_DEB_OUT=$out bash "$root/scripts/package.sh" --no-deps || fail "building the packages"
debs=$(ls "$out"/libuslab0_*.deb "$out"/libuslab-dev_*.deb "$out"/uslab-tools_*.deb) || fail "a package is missing"
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $debs > "$out/install.log" 2>&1 ||
  { tail -20 "$out/install.log"; fail "apt-get install"; }
echo "installed: $(dpkg-query -W -f='${Package} ${Version}, ' $pkgs)"
for t in pkgconfig cmake-package preload tools; do
  echo "== debian/tests/$t"
  AUTOPKGTEST_TMP=$(mktemp -d -p "$out") "$root/debian/tests/$t" || fail "debian/tests/$t"
done
# What the packages put on the system, then their purge: none of it stays.
files=$(for d in $debs; do dpkg-deb -c "$d"; done | awk '{ print $6 }' | sed 's|^\./|/|' | grep -v '/$' | sort -u)
[ -n "$files" ] || fail "no files listed in the packages"
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $pkgs > "$out/purge.log" 2>&1 ||
  { tail -20 "$out/purge.log"; fail "apt-get purge"; }
left=""
for f in $files; do
  [ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done
for d in /usr/lib/x86_64-linux-gnu/cmake/uslab /usr/libexec/uslab /usr/share/doc/libuslab0 /usr/share/doc/libuslab-dev \
         /usr/share/doc/uslab-tools; do
  [ -e "$d" ] && left="$left $d"
done
[ -z "$left" ] || fail "left behind after the purge:$left"
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" && fail "$p still installed"
done
echo "PASS: built, installed, checked and purged ($(echo "$files" | wc -l) files, none left)"
