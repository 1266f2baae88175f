#!/usr/bin/env bash
# Checks that the documentation speaks of the software as it is:
#   - README.md is at most 250 lines;
#   - README.md, CHANGELOG.md's neighbours in docs/, the tutorials' READMEs and
#     every source comment hold no commit id and no "stop N", "round N" or
#     "issue N" (words of a team's work log, not of the software).
# CHANGELOG.md itself may name versions and dates; it is history by design.
# Exit status 1 lists every offending line.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
max_readme=250
lines=$(wc -l <README.md)
if [ "$lines" -gt "$max_readme" ]; then
  echo "check-docs: README.md has $lines lines (at most $max_readme)"
  status=1
fi

# Files to scan: documentation, and source, scripts and build files (their comments).
mapfile -t files < <(git ls-files -- 'README.md' 'docs/*.md' '*/README.md' \
  '*.cpp' '*.hpp' '*.h' '*.py' '*.sh' '*.js' '*.css' '*.html' 'CMakeLists.txt' '*/CMakeLists.txt' '*.cmake' '.ci/run' |
  grep -v -e '^tests/fixtures/.*\.\(json\|txt\)$' -e '^scripts/check-docs\.sh$' || true)

# "stop 31", "round 3", "issue 11", "issues 11 and 12" (any case).
worklog='\b(stop|round|issue)s? #?[0-9]+\b'
if grep -nHiE "$worklog" "${files[@]}"; then
  echo "check-docs: the lines above speak of the team's work log (stop/round/issue N); say what the software does instead"
  status=1
fi

# Commit ids: 7 to 40 hex digits with at least one letter and one digit, as a
# whole word, not a 0x literal and not a number in scientific notation (1e300).
# A line naming a checksum (SHA-1, SHA-256, a git blob id) is left alone, and so
# is the script that rebuilds the old-format fixture: it must name the version
# that wrote that format.
commits=$(grep -nHE '[0-9a-f]{7,40}' "${files[@]}" |
  grep -viE 'sha-?(1|256)|blob id' |
  grep -v '^tests/fixtures/make_checkpoint_v1\.sh:' |
  awk '{ where = $0; sub(/:.*/, "", where); rest = substr($0, length(where) + 2);
         line = rest; sub(/:.*/, "", line); text = substr(rest, length(line) + 2);
         while (match(text, /(^|[^0-9A-Za-z_.])[0-9a-f]+/)) {
           tok = substr(text, RSTART, RLENGTH); text = substr(text, RSTART + RLENGTH);
           sub(/^[^0-9a-f]/, "", tok);
           if (text ~ /^[0-9A-Za-z_]/) continue;
           if (length(tok) >= 7 && length(tok) <= 40 && tok ~ /[a-f]/ && tok ~ /[0-9]/ && tok !~ /^[0-9]+e[0-9]+$/)
             print where ":" line ": " tok
         } }' || true)
if [ -n "$commits" ]; then
  echo "$commits"
  echo "check-docs: the lines above hold what looks like a commit id; history belongs in the git log and CHANGELOG.md"
  status=1
fi

# A test name holding ';' is cut there by catch_discover_tests, and the cut
# name then matches no test: CTest reports "No tests ran" as a failure.
# shellcheck disable=SC2016 # perl's own variables, single-quoted on purpose
semicolons=$(find tests -name '*.cpp' -print0 |
  xargs -0 perl -0777 -ne 'while (/TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)/g) {
      my $n = $1; print "$ARGV: $n\n" if $n =~ /;/ }' || true)
if [ -n "$semicolons" ]; then
  echo "$semicolons"
  echo "check-docs: the test names above hold ';', where catch_discover_tests cuts a name"
  status=1
fi

[ "$status" -eq 0 ] && echo "check-docs: README.md has $lines lines; no work-log words or commit ids in ${#files[@]} files"
exit "$status"
