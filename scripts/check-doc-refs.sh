#!/usr/bin/env bash
# check-doc-refs.sh - every reference to a part of the docs resolves.
#
# Checks, and prints file:line and the reference for each that does not resolve:
#  * markdown links to a local file or anchor in README.md and docs/*.md
#    ([text](path), [text](path#anchor), [text](#anchor)): the file must exist, and
#    the anchor must be one of its headings' GitHub anchors (lowercase, spaces to
#    '-', punctuation removed, a repeated heading numbered -1, -2, ...);
#  * quoted section references, in README.md, docs/ and the comments of src/,
#    include/, tests/, bench/, tools/ and scripts/: a doc named as ARCHITECTURE,
#    GUIDE, PERFORMANCE or README (with or without docs/, .md, 's, or as a
#    markdown link) followed by "Section" (a comma between them or not, a line
#    break of a comment too) must name a heading of that file: the heading
#    itself, or its start before a " (", ":" or ","; and numbered references
#    ("ARCHITECTURE.md sections 2 and 5", "§3") never resolve: the docs have no
#    numbered sections;
#  * inside docs/ARCHITECTURE.md, whose convention is to name its own sections
#    bare, ("Section"), see "Section" and the like name a heading of that file
#    (or, failing that, of another doc).
#
# Usage: bash scripts/check-doc-refs.sh [--docs-only]
#   --docs-only  check README.md and docs/ alone (not the code's comments)
# Exit 0 when everything resolves, 1 otherwise. Needs bash and python3 only.
set -uo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import os, re, sys

docs_only = "--docs-only" in sys.argv[1:]
DOCS = {"ARCHITECTURE": "docs/ARCHITECTURE.md", "GUIDE": "docs/GUIDE.md",
        "PERFORMANCE": "docs/PERFORMANCE.md", "README": "README.md"}
CODE_DIRS = ["src", "include", "tests", "bench", "tools", "scripts"]
CODE_EXT = (".c", ".h", ".sh", ".py", ".txt", ".cmake", ".rs", ".S", ".in", ".md")
SKIP = ("bench/report/",)          # generated output

def md_files():
    out = ["README.md"] if os.path.exists("README.md") else []
    out += sorted("docs/" + f for f in os.listdir("docs") if f.endswith(".md"))
    return out

def strip_code(text):
    """The text with fenced blocks and inline code blanked (lines kept)."""
    out, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
            out.append("")
            continue
        out.append("" if fence else re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line))
    return "\n".join(out)

_head_cache = {}
def headings(path):
    if path not in _head_cache:
        hs, fence = [], False
        try:
            lines = open(path, encoding="utf-8").read().split("\n")
        except OSError:
            lines = []
        for line in lines:
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                hs.append(m.group(1))
        _head_cache[path] = hs
    return _head_cache[path]

def gh_anchor(h):
    a = h.strip().lower()
    a = re.sub(r"[^\w\- ]", "", a)   # punctuation removed (backticks, dots, quotes...)
    return a.replace(" ", "-")

def anchors(path):
    seen, out = {}, set()
    for h in headings(path):
        a = gh_anchor(h)
        n = seen.get(a, 0)
        out.add(a if n == 0 else "%s-%d" % (a, n))
        seen[a] = n + 1
    return out

def norm(s):
    return re.sub(r"\s+", " ", s.replace("`", "")).strip().lower()

def names_heading(ref, path):
    r = norm(ref)
    for h in headings(path):
        h = norm(h)
        if h == r or any(h.startswith(r + sep) for sep in (" (", ":", ",")):
            return True
    return False

problems = []
def bad(path, line, ref, why):
    ref, why = re.sub(r"\s+", " ", ref), re.sub(r"\s+", " ", why)
    problems.append("%s:%d: %s: %s" % (path, line, ref, why))

# ---- markdown links in README.md and docs/ ----
for path in md_files():
    text = strip_code(open(path, encoding="utf-8").read())
    for n, line in enumerate(text.split("\n"), 1):
        for m in re.finditer(r"\]\(([^)\s]+)\)", line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):      # http:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                bad(path, n, target, "no such file")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad(path, n, target, "no heading with that anchor in " + dest)

# ---- quoted section references ----
DOC = r"(?:(?P<dir>[\w./-]+/)?(?P<doc>ARCHITECTURE|GUIDE|PERFORMANCE|README)(?:\.md)?(?:'s)?(?:\]\([^)]*\))?)"
QREF = re.compile(DOC + r",?\s+\"(?P<sec>[^\"]{1,80})\"")
NUMREF = re.compile(DOC + r"(?:,)?\s+(?:sections?\s+\d|§\s*\d)")

def target_of(m, path):
    d, doc = m.group("dir") or "", m.group("doc")
    if doc == "README":
        if d and d.rstrip("/").split("/")[-1] not in ("", "docs", ".."):
            return d + "README.md"          # src/README.md, bench/report/README.md
        return "README.md"
    return DOCS[doc]

def flatten(text, is_code):
    """Join lines into one string (comment markers of continued lines dropped),
    with a table from offset to line number."""
    out, starts = [], []
    pos = 0
    for line in text.split("\n"):
        if is_code:
            line = re.sub(r"^\s*(?:\*|//|#|--)\s?", " ", line)
        starts.append(pos)
        out.append(line)
        pos += len(line) + 1
    return " ".join(out), starts

def line_of(starts, off):
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= off: lo = mid
        else: hi = mid - 1
    return lo + 1

def scan_refs(path, is_code):
    try:
        raw = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return
    if not is_code:
        raw = strip_code(raw)
    flat, starts = flatten(raw, is_code)
    for m in QREF.finditer(flat):
        tgt = target_of(m, path)
        if os.path.basename(tgt) == "README.md" and tgt != "README.md" and not os.path.exists(tgt):
            continue
        if not names_heading(m.group("sec"), tgt):
            bad(path, line_of(starts, m.start()), m.group(0).strip(),
                "no heading \"%s\" in %s" % (m.group("sec"), tgt))
    for m in NUMREF.finditer(flat):
        bad(path, line_of(starts, m.start()), m.group(0).strip(),
            "numbered section reference: the docs' sections have names, not numbers")

for path in md_files():
    scan_refs(path, False)
if not docs_only:
    for d in CODE_DIRS:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                p = os.path.join(root, f)
                if p.startswith(SKIP) or not f.endswith(CODE_EXT) or p == "scripts/check-doc-refs.sh":
                    continue
                scan_refs(p, not f.endswith(".md"))

# ---- bare references inside a doc: ("Section") and see "Section" ----
BARE = re.compile(r"(?:\(|\bsee\s+|;\s+)\"(?P<sec>[A-Z][^\"]{2,60})\"(?=[),;]|\s+says|\s+below|\s+above)")
for path in md_files():
    if path != "docs/ARCHITECTURE.md":
        continue
    text = strip_code(open(path, encoding="utf-8").read())
    flat, starts = flatten(text, False)
    for m in BARE.finditer(flat):
        before = flat[max(0, m.start() - 60):m.start()]
        if re.search(r"(ARCHITECTURE|GUIDE|PERFORMANCE|README)(\.md)?('s)?(\]\([^)]*\))?,?\s*$", before):
            continue                               # a qualified reference, checked above
        sec = m.group("sec")
        if names_heading(sec, path) or any(names_heading(sec, d) for d in md_files()):
            continue
        bad(path, line_of(starts, m.start()), '"%s"' % sec, "no heading of that name in " + path)

for p in problems:
    print(p)
if problems:
    print("check-doc-refs: %d reference(s) do not resolve" % len(problems))
    sys.exit(1)
print("check-doc-refs: every reference resolves (%s)" % ("README.md and docs/" if docs_only else "docs and code comments"))
PY
