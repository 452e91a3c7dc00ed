#!/usr/bin/env bash
# check-subjects.sh - commit subjects a reader can scan: every commit after
# the one that added this script has a subject of at most 72 characters
# (`area: what`; the why and the numbers go in the body). Run by .ci/run.
# Outside a git checkout, or where history is too shallow to hold the
# commit that added it, only HEAD is checked.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "check-subjects: not a git checkout; nothing checked"
  exit 0
fi
since=$(git log --diff-filter=A --format=%H -- scripts/check-subjects.sh 2>/dev/null | tail -1)
if [ -n "$since" ]; then
  range="$since^..HEAD"
  git rev-parse -q --verify "$since^" >/dev/null || range=HEAD
else
  range="-1 HEAD"
fi
bad=0
while IFS=$'\t' read -r hash subject; do
  if [ "${#subject}" -gt 72 ]; then
    echo "check-subjects: ${hash:0:12} has a subject of ${#subject} characters (at most 72): $subject"
    bad=1
  fi
done < <(git log --format='%H%x09%s' $range)
[ "$bad" -eq 0 ] && echo "check-subjects: every subject since ${since:0:12} is at most 72 characters"
exit "$bad"
