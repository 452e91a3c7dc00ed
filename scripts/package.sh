#!/usr/bin/env bash
# package.sh - the Debian packages libuslab0, libuslab-dev and uslab-tools
# (debian/): installs the packaging tools and the build dependencies
# (scripts/deps.sh package), builds them with dpkg-buildpackage in a clean copy
# of the tree (the files git knows of, and new ones it does not ignore),
# checks them with lintian (an error fails), and leaves them in build/deb/
# (their debug symbols in build/deb/dbgsym/). Then:
#     sudo apt-get install ./build/deb/*.deb
# --no-deps: skip scripts/deps.sh. USLAB_DEB_OUT: another output folder.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = --no-deps ] || bash scripts/deps.sh package
out=${USLAB_DEB_OUT:-build/deb}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/uslab"
if git rev-parse --git-dir >/dev/null 2>&1; then
  git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -x -C "$work/uslab"
else
  tar --exclude=./build --exclude=./bindings/rust/target -cf - . | tar -x -C "$work/uslab"
fi
echo "package.sh: dpkg-buildpackage -b -us -uc in $work/uslab" >&2
if ! (cd "$work/uslab" && dpkg-buildpackage -b -us -uc -j"$(nproc)") > "$work/build.log" 2>&1; then
  tail -40 "$work/build.log"
  echo "package.sh: dpkg-buildpackage failed" >&2
  exit 1
fi
if command -v lintian >/dev/null; then
  echo "package.sh: lintian" >&2
  lintian --fail-on error --suppress-tags initial-upload-closes-no-bugs "$work"/*.changes
else
  echo "package.sh: lintian is not installed; the packages are not checked" >&2
fi
rm -rf "$out"
mkdir -p "$out/dbgsym"
mv "$work"/*-dbgsym_*.deb "$out/dbgsym/"
mv "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out/"
echo "package.sh: $(cd "$out" && ls ./*.deb | tr '\n' ' ')in $out/" >&2
