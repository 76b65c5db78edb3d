#!/usr/bin/env bash
# Checks that the repository cites only pages it contains. In every tracked text file (benchmark
# records under docs/benchmarks/records/ excepted):
#   * every path of the form docs/... (also ./docs/... and ../docs/...) must name a tracked file
#     or folder;
#   * every Markdown file named in capitals (a README, a LICENSE page, ...), bare or with a path
#     in front, must exist at the named place.
# A name is looked up relative to the citing file's folder, then each folder above it up to the
# repository root. Prints each offender as file:line: name, and exits 1 if there is any.
#
#   tools/check-citations.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Candidates, as file:line:match. Each match carries the one character in front of it (so that a
# path inside a longer path or a URL is not taken for a citation); awk strips it.
docs_re='(^|[^A-Za-z0-9_./:-])(\.\./|\./)*docs/[A-Za-z0-9_./-]*'
caps_re='(^|[^A-Za-z0-9_./:-])([A-Za-z0-9_.-]+/)*[A-Z][A-Z_]*\.md[A-Za-z0-9_]?'

candidates="$(git ls-files -z -- . ':!docs/benchmarks/records/' \
    | xargs -0 grep -HnIoE -e "$docs_re" -e "$caps_re" 2>/dev/null || true)"

# First input: every tracked file (each one and its folders become known names); second: the
# candidates.
printf '%s\n' "$candidates" | awk '
BEGIN { known["."] = 1; bad = 0 }
NR == FNR {
    path = $0
    known[path] = 1
    while (sub(/\/[^\/]*$/, "", path)) known[path] = 1
    next
}
# "a/./b/../c" -> "a/c"; "" and "." -> "."; a path that leaves the root -> "" (never known).
function normalize(p,    parts, out, k, i, m) {
    m = split(p, parts, "/")
    k = 0
    for (i = 1; i <= m; i++) {
        if (parts[i] == "" || parts[i] == ".") continue
        if (parts[i] == "..") { if (k == 0) return ""; k--; continue }
        out[++k] = parts[i]
    }
    if (k == 0) return "."
    p = out[1]
    for (i = 2; i <= k; i++) p = p "/" out[i]
    return p
}
# Whether name exists relative to the folder of file or of any folder above it.
function resolves(file, name,    dir) {
    dir = file
    if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
    while (1) {
        if (normalize(dir "/" name) in known) return 1
        if (dir == ".") return 0
        if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
    }
}
$0 == "" { next }
{
    # file:line:match (tracked file names hold no colon).
    i = index($0, ":"); file = substr($0, 1, i - 1); rest = substr($0, i + 1)
    i = index(rest, ":"); line = substr(rest, 1, i - 1); name = substr(rest, i + 1)
    if (name !~ /^[A-Za-z0-9_.\/:-]/) name = substr(name, 2)   # the context character
    if (name ~ /\.md[A-Za-z0-9_]$/) next                        # README.mdx and the like
    sub(/[.]+$/, "", name)                                      # a sentence ending after the path
    sub(/\/+$/, "", name)
    if (name == "" || name == "." || name == "..") next
    if (!resolves(file, name)) {
        printf "%s:%s: %s\n", file, line, name
        bad = 1
    }
}
END { exit bad }
' <(git ls-files) - || exit 1
echo "check-citations: every cited docs/ path and capitalised .md page exists" >&2
