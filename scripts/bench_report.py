#!/usr/bin/env python3
"""bench_report.py - the benchmark report of scripts/bench.sh.

  bench_report.py meta DIR --mode full|quick --command "..."
      at the start of a run: what the report's header states about the machine,
      the libraries and the command, into DIR/raw/meta.json.
  bench_report.py report DIR
      at the end: DIR/README.md with every table the programs printed (from
      DIR/raw/*.txt) and the plots (DIR/*.png, drawn with gnuplot from the
      programs' --data lines in DIR/raw/data.tsv and the redis scenario's
      DIR/raw/redis.tsv); then a short summary on stdout.

A plot whose data or whose gnuplot is missing is left out and the report says
so; nothing else stops the report. Only the Python standard library is used.
"""
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

# ------------------------------------------------------------------ meta


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def collect_meta(mode, command):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = "%.1f GiB" % (int(line.split()[1]) / 1048576)
                    break
    except OSError:
        pass
    versions = {}
    for p in ["libc6", "libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0", "redis-server", "gcc-12"]:
        versions[p] = sh("dpkg-query -W -f='${Version}' %s 2>/dev/null" % p) or "not installed"
    # the sources the run builds and runs (the report's own directory aside)
    dirty = sh("git status --porcelain -- src include bench scripts CMakeLists.txt ':!bench/report' 2>/dev/null")
    return {
        "mode": mode,
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "cpu": cpu or platform.processor() or "unknown",
        "ncpu": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "debian": sh("cat /etc/debian_version") or "unknown",
        "loadavg": sh("cut -d' ' -f1-3 /proc/loadavg"),
        "compiler": sh("cc --version | head -1"),
        "versions": versions,
        "commit": sh("git rev-parse HEAD 2>/dev/null") or "unknown",
        "commit_subject": sh("git log -1 --format=%s 2>/dev/null"),
        "dirty": bool(dirty),
    }


# ------------------------------------------------------------------ reading


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_data(raw):
    """DIR/raw/data.tsv: {(program, table, allocator, metric, x): (median, min, max, runs)}."""
    data = {}
    text = read(os.path.join(raw, "data.tsv")) or ""
    for line in text.splitlines():
        f = line.split("\t")
        if len(f) != 9:
            continue
        try:
            data[tuple(f[:5])] = (float(f[5]), float(f[6]), float(f[7]), int(f[8]))
        except ValueError:
            continue
    return data


def read_parts(raw):
    parts = []
    for line in (read(os.path.join(raw, "parts.tsv")) or "").splitlines():
        f = line.split("\t")
        if len(f) >= 3:
            parts.append({"name": f[0], "rc": f[1], "secs": int(f[2]) if f[2].isdigit() else 0,
                          "cmd": f[3] if len(f) > 3 else "", "load": f[4] if len(f) > 4 else ""})
    return parts


def read_redis(raw):
    """Medians per allocator of DIR/raw/redis.tsv: ([allocators in order], {alloc: [5 MB], ...}, {alloc: [[5 MB] per round]})."""
    text = read(os.path.join(raw, "redis.tsv"))
    if not text:
        return [], {}, {}
    order, rounds = [], {}
    for line in text.splitlines()[1:]:
        f = line.split("\t")
        if len(f) < 7:
            continue
        try:
            vals = [int(x) / 1000.0 for x in f[2:7]]
        except ValueError:
            continue
        if f[0] not in rounds:
            order.append(f[0])
            rounds[f[0]] = []
        rounds[f[0]].append(vals)
    med = {}
    for a, rs in rounds.items():
        med[a] = [median([r[i] for r in rs]) for i in range(5)]
    return order, med, rounds


def read_kernel(raw):
    """The kernel's suites (DIR/raw/kernel.tsv): ([suites], [variants], {(suite, variant): (median, min, max)}),
    a variant left out of a suite where one of its runs failed."""
    text = read(os.path.join(raw, "kernel.tsv"))
    runs, bad = {}, set()
    suites, variants = [], []
    for line in (text or "").splitlines()[1:]:
        f = line.split("\t")
        if len(f) < 5:
            continue
        try:
            secs = float(f[3])
        except ValueError:
            continue
        if f[0] not in suites:
            suites.append(f[0])
        if f[1] not in variants:
            variants.append(f[1])
        if f[4] != "0":
            bad.add((f[0], f[1]))
        runs.setdefault((f[0], f[1]), []).append(secs)
    vals = {k: (median(v), min(v), max(v)) for k, v in runs.items() if k not in bad}
    return suites, variants, vals


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def fmt_secs(s):
    return "%dm %02ds" % (s // 60, s % 60) if s >= 60 else "%ds" % s


# ------------------------------------------------------------------ plots

# The peers as the programs' --data and the scripts' TSV files name them (the
# keys, kept as they were); DISPLAY: the names the report shows for keys that
# differ. Debian's libtcmalloc-minimal4 is gperftools' tcmalloc (per-thread
# caches), not Google's current tcmalloc (per-CPU caches): it shows as
# "gperftools", with GPERFTOOLS_NOTE under each table, plot and summary that
# has it (as the programs print it, bench/common/peers.h).
PEERS = ["glibc", "jemalloc", "tcmalloc", "mimalloc"]
DISPLAY = {"tcmalloc": "gperftools"}
GPERFTOOLS_NOTE = ("gperftools = Debian libtcmalloc-minimal4, gperftools %s tcmalloc with per-thread caches "
                   "(not Google's per-CPU tcmalloc)")


def disp(name):
    """The name the report shows for an allocator key."""
    return DISPLAY.get(name, name)


def gperftools_note(meta=None):
    """The legend line of gperftools, its version from the run's meta.json where known (2.10-1 -> 2.10)."""
    ver = ((meta or {}).get("versions") or {}).get("libtcmalloc-minimal4", "")
    ver = ver.split(":")[-1].rsplit("-", 1)[0] if ver and ver != "not installed" else "2.10"
    return GPERFTOOLS_NOTE % ver

COLOURS = {
    "uslab sheaves (rseq)": "#1f4e9c", "uslab": "#1f4e9c",
    "uslab cpu-slab (rseq)": "#4a90d9", "uslab-nosheaves": "#4a90d9",
    "uslab sheaves (locked)": "#8ab8e6", "uslab-decay0": "#8ab8e6", "uslab-ordered": "#8ab8e6",
    "uslab-owned": "#2ca6a4",
    "uslab cpu-slab (locked)": "#b8d3f0",
    "uslab slab (rseq)": "#1b7a3a", "uslab-slab": "#1b7a3a",
    "uslab slab (locked)": "#6cc17f",
    "uslab slab, colour locked": "#a4d9a0",
    "uslab slab, no colour": "#c7e9c0",
    "uslab static (extra)": "#6a3d9a",
    "uslab sheaves, simple": "#1f4e9c", "uslab cpu-slab, simple": "#4a90d9",
    "uslab malloc": "#00a0a0",
    "uslab malloc, slab": "#80d0c8",
    "glibc": "#555555",
    "jemalloc": "#d62728",
    "tcmalloc": "#ff7f0e", "gperftools": "#ff7f0e",
    "mimalloc": "#8c564b",
    "(floor: 2 empty calls)": "#bbbbbb",
}
SIZE = "960,540"


def colour(name):
    return COLOURS.get(name, "#999999")


def gq(s):
    """A gnuplot double-quoted string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def cut_bar_labels(groups, series, values, ymax):
    """Bars cut by the axis at ymax get their value written at the top."""
    labels = []
    bw = 1.0 / (len(series) + 1.5)
    for i, g in enumerate(groups):
        for j, sname in enumerate(series):
            v = values.get((g, sname))
            if v and v[0] > ymax:
                labels.append("set label %s at %f, %f rotate by 90 right front font ',8'"
                              % (gq("%.3g" % v[0]), i + (j - (len(series) - 1) / 2.0) * bw, ymax * 0.98))
    return labels


class Plotter:
    def __init__(self, outdir):
        self.outdir = outdir
        self.tmp = tempfile.mkdtemp(prefix="bench-report-")
        self.gnuplot = shutil.which("gnuplot")
        self.made = []      # (png, title, caption)
        self.missing = []   # (title, why)
        self.nfile = 0
        self.meta = {}      # the run's meta.json (gperftools' version)

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def datafile(self, lines):
        self.nfile += 1
        p = os.path.join(self.tmp, "d%d.dat" % self.nfile)
        with open(p, "w") as f:
            f.write("\n".join(lines) + "\n")
        return p

    def run(self, png, title, caption, script, names=()):
        """names: the allocators (keys) the plot shows; with gperftools among them the plot gets its legend line
        at the bottom and the caption the same."""
        if any(disp(n) == "gperftools" for n in names):
            script = ["set label %s at screen 0.005, screen 0.012 left font ',8' textcolor rgb '#444444'"
                      % gq(gperftools_note(self.meta))] + script
            if not any(line.startswith("set bmargin") for line in script):
                script = ["set bmargin 5"] + script     # the x axis' label above the line
            caption += "; " + gperftools_note(self.meta)
        if not self.gnuplot:
            self.missing.append((title, "gnuplot is not installed (scripts/deps.sh bench installs gnuplot-nox)"))
            return
        out = os.path.join(self.outdir, png)
        head = ["set terminal pngcairo size %s font 'sans,10' noenhanced" % SIZE,
                "set output %s" % gq(out), "set title %s" % gq(title), "set grid ytics lc rgb '#dddddd'",
                "set datafile missing 'NaN'"]
        sp = os.path.join(self.tmp, png + ".gp")
        with open(sp, "w") as f:
            f.write("\n".join(head + script) + "\n")
        r = subprocess.run(["gnuplot", sp], capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(out) or os.path.getsize(out) == 0:
            self.missing.append((title, "gnuplot failed: " + (r.stderr.strip().splitlines() or ["?"])[-1][:200]))
            if os.path.exists(out):
                os.remove(out)
            return
        self.made.append((png, title, caption))

    def curves(self, png, title, caption, xlabel, ylabel, series, logx=False, logy=False, xtics=None):
        """series: [(name, [(x, y)], dashed)]; a series without points is left out."""
        series = [s for s in series if s[1]]
        if not series:
            self.missing.append((title, "no data (the table's step did not run or every row FAILED)"))
            return
        sc = ["set xlabel %s" % gq(xlabel), "set ylabel %s" % gq(ylabel),
              "set key outside right top vertical Left reverse samplen 3 spacing 1.1 font ',9'",
              "set yrange [0:*]" if not logy else "set logscale y"]
        xs = [x for _, pts, _ in series for x, _ in pts]
        if logx:
            sc.append("set logscale x 2" if xtics else "set logscale x")
            sc.append("set xrange [%g:%g]" % (min(xs) / 1.15, max(xs) * 1.15))
        if xtics:
            sc.append("set xtics (%s)" % ", ".join("%s %s" % (gq(str(x)).replace("%", "%%"), x) for x in xtics))
        plots = []
        for i, (name, pts, dashed) in enumerate(series):
            f = self.datafile(["%s %s" % (x, y) for x, y in pts])
            plots.append("%s using 1:2 with linespoints lw 2 pt %d ps 0.8 dt %d lc rgb %s title %s"
                         % (gq(f), 4 + 2 * (i % 6) + (1 if dashed else 0), 2 if dashed else 1,
                            gq(colour(name)), gq(disp(name))))
        sc.append("plot " + ", \\\n  ".join(plots))
        self.run(png, title, caption, sc, [n for n, _, _ in series])

    def bars(self, png, title, caption, ylabel, groups, series, values, hline=None, ymax=None, key="outside",
             rotate=False):
        """Clustered bars: groups (labels on x), one bar per series in each;
        values[(group, series)] = (y, low, high) (the range as error bars) or absent."""
        series = [s for s in series if any((g, s) in values for g in groups)]
        groups = [g for g in groups if any((g, s) in values for s in series)]
        if not series:
            self.missing.append((title, "no data (the table's step did not run or every row FAILED)"))
            return
        lines = []
        for g in groups:
            row = []
            for s in series:
                v = values.get((g, s))
                row += ["%.6g %.6g %.6g" % v if v else "NaN NaN NaN"]
            lines.append(" ".join(row))
        f = self.datafile(lines)
        sc = ["set style data histograms", "set style histogram errorbars gap 1.5 lw 1",
              "set style fill solid 0.85 border rgb '#333333'", "set boxwidth 0.92",
              "set ylabel %s" % gq(ylabel), "set bars 0.4",
              "set xtics (%s) nomirror%s" % (", ".join("%s %d" % (gq(disp(g)).replace("%", "%%"), i)
                                                       for i, g in enumerate(groups)),
                                            " rotate by 30 right" if rotate else ""),
              "set bmargin %d" % (7 if rotate else 4),
              "set xrange [-0.6:%f]" % (len(groups) - 0.4),
              "set yrange [0:%s]" % (ymax if ymax else "*")]
        if key == "outside":
            sc.append("set key outside right top vertical Left reverse font ',9'")
        elif key == "off":
            sc.append("unset key")
        else:
            sc.append("set key %s font ',9'" % key)
        if ymax:
            sc += cut_bar_labels(groups, series, values, ymax)
        if hline is not None:
            sc.append("set arrow from graph 0, first %g to graph 1, first %g nohead dt 2 lw 1.5 lc rgb '#000000' front"
                      % (hline, hline))
        plots = []
        for i, s in enumerate(series):
            plots.append("%s using %d:%d:%d lc rgb %s title %s" % (gq(f), 3 * i + 1, 3 * i + 2, 3 * i + 3,
                                                                   gq(colour(s)), gq(disp(s))))
        sc.append("plot " + ", \\\n  ".join(plots))
        self.run(png, title, caption, sc, list(groups) + list(series))


def present_allocators(data, program, table):
    seen = []
    for k in data:
        if k[0] == program and k[1] == table and k[2] not in seen:
            seen.append(k[2])
    return seen


def order_allocators(names):
    """uslab's rows first in the programs' order (kept as first seen), the peers last."""
    return [n for n in names if n not in PEERS] + [p for p in PEERS if p in names]


def plot_kernel(p, kernel):
    """The kernel's suites: each variant's time over glibc's (the kernel's own shim on glibc)."""
    suites, variants, vals = kernel
    values = {}
    for s in suites:
        base = vals.get((s, "glibc"))
        if not base:
            continue
        for v in variants:
            if (s, v) in vals:
                m, lo, hi = vals[(s, v)]
                values[(s, v)] = (m / base[0], lo / base[0], hi / base[0])
    p.bars("kernel-suites.png", "the kernel's test suites (tools/testing/radix-tree): time over glibc's; lower is better",
           "uslab: kmem_cache on uslab's caches (tests/kernel/); the others: the kernel's own shim (malloc + a mutex) "
           "over that malloc; uslab-malloc: the same shim on uslab's malloc; whiskers: least..greatest run",
           "time / glibc", suites, variants, values, hline=1.0)


def plot_bulk(p, data):
    """(a) bulk: ns per object against N."""
    B = "uslab-bench"
    for which, png, metric, cap in [
        ("bulk API", "bulk-api.png", "bulk ns/object",
         "uslab's kmem_cache_alloc_bulk + kmem_cache_free_bulk (solid) against the peers' N x malloc + N x free "
         "(dashed)"),
        ("fallback", "bulk-fallback.png", "fallback ns/object",
         "uslab's N x kmem_cache_alloc + N x kmem_cache_free and uslab's malloc (solid) against the peers' "
         "N x malloc + N x free (dashed)")]:
        names = order_allocators(present_allocators(data, B, "bulk"))
        series = []
        for n in names:
            m = metric if (B, "bulk", n, metric, "1") in data else "malloc ns/object"
            if n not in PEERS and m == "malloc ns/object" and which == "bulk API":
                continue     # uslab's malloc rows have no bulk API
            pts = sorted((int(k[4]), v[0]) for k, v in data.items()
                         if k[0] == B and k[1] == "bulk" and k[2] == n and k[3] == m)
            series.append((n, pts, n in PEERS))
        xt = [x for x in sorted({int(k[4]) for k in data if k[0] == B and k[1] == "bulk"})
              if x & (x - 1) == 0 or x == max(int(k[4]) for k in data if k[0] == B and k[1] == "bulk")]
        p.curves(png, "bulk (%s): 256-byte objects, N allocated then N freed; ns per object, lower is better" % which,
                 cap, "N (objects per call or batch), log scale", "ns per object (alloc + free)", series, logx=True,
                 xtics=xt)


def plot_sizes(p, data):
    """(a) nalloc and seed003: ticks per call against size."""
    B = "uslab-bench"
    for table, desc in [("nalloc", "one thread, kmem_cache per size (peers: malloc)"),
                        ("seed003", "kmalloc, a thread on each of two CPUs at once (peers: malloc)")]:
        for op in ["alloc", "free"]:
            names = order_allocators(present_allocators(data, B, table))
            series = []
            for n in names:
                pts = sorted((int(k[4]), v[0]) for k, v in data.items()
                             if k[0] == B and k[1] == table and k[2] == n and k[3] == "ticks/" + op)
                series.append((n, pts, n in PEERS))
            xt = sorted({int(k[4]) for k in data if k[0] == B and k[1] == table})
            p.curves("%s-%s.png" % (table, op),
                     "%s N*alloc N*free: ticks per %s by size, lower is better" % (table, op),
                     "%s; average TSC ticks per %s call (rdtsc included), log scale on both axes" % (desc, op),
                     "object size (bytes), log scale", "ticks per %s" % op, series, logx=True, logy=True, xtics=xt)


def plot_detached(p, data):
    """(a) detached: seed 000's second table, mean cycles per object against N
    (uslab-bench writes the mean of its runs where the others have medians)."""
    B = "uslab-bench"
    rows = order_allocators(present_allocators(data, B, "detached"))
    series = []
    for n in rows:
        pts = sorted((int(k[4]), v[0]) for k, v in data.items()
                     if k[0] == B and k[1] == "detached" and k[2] == n and k[3] == "cycles/object")
        series.append((n, pts, "simple" in n))
    xt = sorted({int(k[4]) for k in data if k[0] == B and k[1] == "detached"})
    p.curves("detached.png", "detached: bulk alloc + free of N 256-byte objects; cycles per object, lower is better",
             "the detached freelists' look-ahead of 3 (solid) against the simple ones, consecutive objects only "
             "(USLAB_BULK_LOOKAHEAD=1, dashed), with sheaves and without; the mean of the runs (processes), "
             "as seed 000 gave it", "N (objects per call), log scale", "TSC cycles per object (alloc + free)",
             series, logx=True, xtics=xt)


def mbench_allocators(data):
    """uslab-mbench's rows, uslab's first."""
    return order_allocators(list(dict.fromkeys(k[2] for k in data if k[0] == "uslab-mbench")))


def plot_mbench(p, data):
    """(b) uslab-mbench: time and peak RSS per workload, over the best peer's."""
    M = "uslab-mbench"
    workloads = []
    for k in data:
        if k[0] == M and k[1] not in workloads:
            workloads.append(k[1])
    allocs = mbench_allocators(data)
    for metric, png, what, unit in [("time s", "mbench-time.png", "wall time", "s"),
                                    ("peak RSS MB", "mbench-rss.png", "peak RSS", "MB")]:
        values, labels = {}, []
        top = 0
        for w in workloads:
            best = [data[(M, w, a, metric, "")][0] for a in PEERS if (M, w, a, metric, "") in data]
            best = min([b for b in best if b > 0], default=0)
            label = "%s\n(%.3g %s)" % (w, best, unit) if best else w
            labels.append(label)
            for a in allocs:
                v = data.get((M, w, a, metric, ""))
                if v and best:
                    values[(label, a)] = (v[0] / best, v[1] / best, v[2] / best)
                    top = max(top, v[0] / best)
        ymax = None
        if top > 4:
            ymax = 4   # a far outlier would flatten the rest: cut, its value written on it
        p.bars(png, "uslab-mbench: %s / the best peer's (glibc, jemalloc, gperftools, mimalloc), per workload; "
               "lower is better" % what,
               "%s as a ratio to the best peer of each workload (the peer's own %s under the workload's name); bars: "
               "medians, whiskers: the fastest..slowest run (time) or least..greatest (RSS)%s"
               % (what, what, "; the y axis stops at 4, a taller bar is cut and its value written on it"
                  if ymax else ""),
               "%s / best peer's" % what, labels, allocs, values, hline=1.0, ymax=ymax)


def plot_programs(p, data):
    """(b2) the real programs: time and peak RSS over glibc's, and their geomean."""
    M = "uslab-mbench"
    allocs = mbench_allocators(data)
    progs = [w for w in ["python3", "python3-malloc", "perl", "sqlite3", "gcc", "redis", "sort"]
             if (M, w, "glibc", "time s", "") in data]
    if progs:
        for metric, gmetric, png, what in [("time s", "time /glibc", "programs-time.png", "wall time"),
                                           ("peak RSS MB", "peak RSS /glibc", "programs-rss.png", "peak RSS")]:
            values, labels = {}, []
            for w in progs + ["geomean"]:
                label = w
                labels.append(label)
                for a in allocs:
                    if w == "geomean":
                        v = data.get((M, "programs geomean", a, gmetric, ""))
                        if v:
                            values[(label, a)] = (v[0], v[0], v[0])
                        continue
                    v, g = data.get((M, w, a, metric, "")), data.get((M, w, "glibc", metric, ""))
                    if v and g and g[0] > 0:
                        values[(label, a)] = (v[0] / g[0], v[1] / g[0], v[2] / g[0])
            p.bars(png, "real programs: %s / glibc's, per program and their geomean; lower is better" % what,
                   "each program under every allocator through LD_PRELOAD, interleaved runs; bars: medians over "
                   "glibc's median, whiskers: the fastest..slowest run (time) or least..greatest (RSS); geomean: "
                   "over the programs, of the medians' ratios", "%s / glibc's" % what, labels, allocs, values,
                   hline=1.0)


def short_name(n):
    """uslab's rows without the word uslab (and the static row without its '(extra)')."""
    return n.replace("uslab ", "").replace(" (extra)", "") if n.startswith("uslab ") else n


def plot_per_allocator(p, data):
    """(c) single pair, random-free and partial-drain, per allocator."""
    B = "uslab-bench"
    COLOURS.update({"ns/pair": "#1f4e9c", "N=10k": "#ff7f0e", "N=1M": "#d62728", "seconds": "#1f4e9c",
                    "cmpxchg_double": "#1f4e9c", "list_lock": "#d62728"})
    for png, title, cap, parts in [
        ("single.png", "single: a 256-byte alloc+free pair; ns per pair, lower is better",
         "uslab's rows: kmem_cache_alloc + kmem_cache_free (the malloc rows: malloc + free), the peers: malloc + "
         "free; the floor: two empty calls through pointers",
         [("single", "ns/pair", "", "ns/pair")]),
        ("random-free.png", "random-free: N live 256-byte objects freed in a random order and allocated again; "
         "ns per object, lower is better", "N = 10k (about the last-level cache) and 1M (far beyond it)",
         [("random-free", "ns/object", "10000", "N=10k"), ("random-free", "ns/object", "1000000", "N=1M")]),
        ("partial-drain.png", "partial-drain: N live 256-byte objects, a random half freed and allocated again "
         "each round; ns per block, lower is better", "N = 10k and 1M; per round N/2 of the N objects, chosen "
         "at random, freed in a random order and allocated again, the other half staying live (no slab empties)",
         [("partial-drain", "ns/block", "10000", "N=10k"), ("partial-drain", "ns/block", "1000000", "N=1M")]),
        ("messaging.png", "messaging: 2 groups of 20 sender and 20 receiver threads through pipes; wall seconds, "
         "lower is better", "the receiver frees what the sender allocated (uslab's rows: kmalloc/kfree, the "
         "others: malloc/free); most of the time is the pipes' system calls",
         [("messaging", "seconds", "", "seconds")]),
        ("messaging-counters.png", "messaging: uslab's slab CAS and list_lock per 1000 messages (USLAB_STATS); "
         "lower is better", "cmpxchg_double: slab {freelist, counters} compare-and-swaps tried; list_lock: node "
         "list_lock taken by the allocation and free paths; with sheaves and without",
         [("messaging counters", "cmpxchg_double/1000 msgs", "", "cmpxchg_double"),
          ("messaging counters", "list_lock/1000 msgs", "", "list_lock")])]:
        names = []
        for t, m, x, _ in parts:
            names += [k[2] for k in data if k[0] == B and k[1] == t and k[3] == m and k[4] == x]
        names = order_allocators(list(dict.fromkeys(names)))
        values = {}
        for t, m, x, label in parts:
            for n in names:
                v = data.get((B, t, n, m, x))
                if v:
                    values[(short_name(n), label)] = v[:3]
        p.bars(png, title, cap + "; uslab's rows first, without the word 'uslab'; bars: medians of the runs, "
               "whiskers: the least..greatest run",
               {"messaging.png": "seconds", "messaging-counters.png": "per 1000 messages"}.get(png, "ns"),
               [short_name(n) for n in names], [g[3] for g in parts], values,
               key="inside left top" if len(parts) > 1 else "off", rotate=True)


def plot_redis(p, redis):
    """(d) redis: RSS at each point of the scenario."""
    order, med, _ = redis
    phases = ["start", "loaded", "after DEL 80%", "after more keys", "after FLUSHALL + idle"]
    values = {}
    for a in order:
        for i, ph in enumerate(phases):
            values[(ph, a)] = (med[a][i], med[a][i], med[a][i])
    p.bars("redis-rss.png", "redis-server: RSS (MB) at each point of the scenario; lower is better",
           "VmRSS in MB (kB / 1000), medians of the rounds, per allocator (the spread is in the tables)",
           "RSS MB", phases, order, values)


def plot_all(p, data, redis):
    """Every plot but the kernel suites', in the report's order."""
    plot_bulk(p, data)
    plot_sizes(p, data)
    plot_detached(p, data)
    plot_mbench(p, data)
    plot_programs(p, data)
    plot_per_allocator(p, data)
    plot_redis(p, redis)


# ------------------------------------------------------------------ tables

DESCRIBE = [
    # (program, title prefix, what the section measures)
    ("uslab-bench", "single", "The fast path: one 256-byte allocation and its free, back to back, per pair."),
    ("uslab-bench", "nalloc", "One thread: 10000 allocations of one size, each timed, then 10000 frees; ticks per "
     "call by size."),
    ("uslab-bench", "bulk", "Objects allocated N at a time and freed N at a time: uslab's bulk API against single "
     "calls (fallback), and the peers' N mallocs + N frees."),
    ("uslab-bench", "detached", "The bulk free's detached freelists: simple (consecutive objects of one slab) "
     "against look-ahead, sheaves on and off; mean, standard deviation and range of many processes."),
    ("uslab-bench", "messaging", "Threads sending messages through pipes (perf bench sched messaging), every "
     "allocator; then the kmalloc caches' slow-path counters per 1000 messages."),
    ("uslab-bench", "remote", "Cross-thread frees: one thread allocates, another frees through a ring."),
    ("uslab-bench", "random-free", "N live objects (10k: about the last-level cache; 1M: far beyond) freed in a "
     "random order and allocated again: slow paths and cache misses."),
    ("uslab-bench", "partial-drain", "N live objects (10k and 1M) of which a random half is freed in a random "
     "order and allocated again each round, the other half staying live: every slab stays partly used, so the "
     "allocations refill from partial slabs (ns per freed and reallocated block)."),
    ("uslab-bench", "seed003", "nalloc through kmalloc with a thread on each of two CPUs at once; SLAB with its "
     "colour advanced under the node lock and without."),
    ("uslab-bench", "colour", "What SLAB's slab colouring buys: reading the first cache line of M objects in turn."),
    ("uslab-bench", "summary", "uslab (sheaves, rseq: the default) against the best peer of each row."),
    ("uslab-mbench", "larson", "Threads replace random blocks; arrays handed between threads, so blocks are freed "
     "by other threads."),
    ("uslab-mbench", "xmalloc", "Producer threads allocate, consumer threads free."),
    ("uslab-mbench", "cache-scratch", "False sharing: threads given neighbouring blocks write their own blocks."),
    ("uslab-mbench", "churn", "One thread, sizes 8 B..64 KiB, malloc/free/realloc; and the RSS given back after "
     "freeing everything."),
    ("uslab-mbench", "large", "Large blocks (5..25 MiB) zero-filled and freed: page faults and reuse."),
    ("uslab-mbench", "python3 with its object allocator off", "A real program under LD_PRELOAD: the same python3 "
     "job with PYTHONMALLOC=malloc, so every object comes from malloc."),
    ("uslab-mbench", "python3", "A real program under LD_PRELOAD: python3 (dicts, sorting, sets, json)."),
    ("uslab-mbench", "gcc", "A real program under LD_PRELOAD: gcc -O2 compiling uslab's sources (cc1 preloaded "
     "too)."),
    ("uslab-mbench", "redis-server", "A server under its own load generator: redis-server preloaded, "
     "redis-benchmark (not preloaded) on the other CPU over loopback; the server's peak RSS."),
    ("uslab-mbench", "real programs: geomean", "The geomean over the real programs of each allocator's time and "
     "peak RSS over glibc's."),
    ("uslab-mbench", "sort", "A real program under LD_PRELOAD: sort -n of a large file."),
    ("uslab-mbench", "sqlite3", "A real program under LD_PRELOAD: sqlite3 in memory, inserts and indexes."),
    ("uslab-mbench", "perl", "A real program under LD_PRELOAD: perl, a large hash, sorted."),
    ("uslab-mbench", "summary", "uslab against the best peer of each workload, time and peak RSS."),
    ("uslab-dbench", "debug cost, single", "What each USLAB_DEBUG letter costs on the single pair, against "
     "glibc's checking mode."),
    ("uslab-dbench", "debug cost, larson", "The same on the larson-like workload (4 threads)."),
    ("uslab-dbench", "heap misuse", "Which heap misuse each allocator detects, as it ships."),
]


def split_sections(text):
    """[(title or None, block text)]: the preamble, then one block per '== title ==' header."""
    blocks, cur, title = [], [], None
    for line in text.splitlines():
        if line.startswith("== ") and line.rstrip().endswith("=="):
            if any(x.strip() for x in cur):
                blocks.append((title, "\n".join(cur).strip("\n")))
            cur, title = [line], line.strip("= ").strip()
        else:
            cur.append(line)
    if any(x.strip() for x in cur):
        blocks.append((title, "\n".join(cur).strip("\n")))
    return blocks


def describe(program, title):
    for prog, prefix, what in DESCRIBE:
        if prog == program and title.startswith(prefix):
            return prefix, what
    return title.split(":")[0].split(";")[0], ""


def fence(text):
    return "```\n" + text.rstrip("\n") + "\n```\n"


def part_output(raw, name):
    """A part's stdout, fenced, or the note that it printed nothing."""
    text = read(os.path.join(raw, name))
    if not text or not text.strip():
        return "*No output: this part did not run or printed nothing.*\n"
    return fence(text.strip())


def stderr_notes(text):
    """Lines of a program's stderr that are neither progress nor the scenario's
    per-round log: failures, notes and warnings."""
    out = []
    for line in (text or "").splitlines():
        s = line.strip()
        if not s or re.match(r"^\[\d+/\d+\] ", s) or s.startswith("== bench.sh: "):
            continue
        out.append(s)
    return out


# ------------------------------------------------------------------ summary


def summary_lines(data, parts, redis, meta, kernel=None):
    """The compact summary: the parts, then uslab's default row against the best peer."""
    out = []
    B, M = "uslab-bench", "uslab-mbench"
    for pt in parts:
        if pt["name"] == "total":
            continue
        out.append("%-13s %-10s %8s%s" % (pt["name"], "ok" if pt["rc"] == "0" else "FAILED (exit %s)" % pt["rc"],
                                          fmt_secs(pt["secs"]),
                                          "   load average at its end %s" % pt["load"] if pt["load"] else ""))

    def best_peer(prog, table, metric, x):
        c = [(data[(prog, table, a, metric, x)][0], disp(a)) for a in PEERS if (prog, table, a, metric, x) in data]
        c = [t for t in c if t[0] > 0]
        return min(c) if c else None

    def ratio(prog, table, who, metric, x="", peer_metric=None):
        b = best_peer(prog, table, peer_metric or metric, x)
        v = data.get((prog, table, who, metric, x))
        if not b or not v:
            return None
        return v[0] / b[0], b[1], v[0], b[0]

    U = "uslab sheaves (rseq)"
    rows = []
    for label, table, metric, x, who in [
            ("single pair ns", "single", "ns/pair", "", U),
            ("single pair ns, uslab malloc", "single", "ns/pair", "", "uslab malloc"),
            ("remote ns/object", "remote", "ns/object", "", U),
            ("random-free 10k ns/object", "random-free", "ns/object", "10000", U),
            ("random-free 1M ns/object", "random-free", "ns/object", "1000000", U),
            ("random-free 10k, uslab malloc", "random-free", "ns/object", "10000", "uslab malloc"),
            ("random-free 1M, uslab malloc", "random-free", "ns/object", "1000000", "uslab malloc"),
            ("partial-drain 10k ns/block", "partial-drain", "ns/block", "10000", U),
            ("partial-drain 1M ns/block", "partial-drain", "ns/block", "1000000", U),
            ("partial-drain 10k, uslab malloc", "partial-drain", "ns/block", "10000", "uslab malloc"),
            ("partial-drain 1M, uslab malloc", "partial-drain", "ns/block", "1000000", "uslab malloc")]:
        r = ratio(B, table, who, metric, x)
        if r:
            rows.append("  %-31s uslab %8.2f  best peer %8.2f (%s)  uslab/best %.2f" % (label, r[2], r[3], r[1], r[0]))
    # the peers' bulk rows are N mallocs + N frees
    for label, table, metric, pm, who in [("bulk API ns/object", "bulk", "bulk ns/object", "malloc ns/object", U),
                                          ("bulk fallback ns/object", "bulk", "fallback ns/object",
                                           "malloc ns/object", U),
                                          ("nalloc alloc ticks", "nalloc", "ticks/alloc", None, U),
                                          ("nalloc free ticks", "nalloc", "ticks/free", None, U)]:
        xs = sorted({k[4] for k in data if k[0] == B and k[1] == table and k[3] == metric}, key=int)
        rs = [(ratio(B, table, who, metric, x, pm), x) for x in xs]
        rs = [(r[0], x) for r, x in rs if r]
        if rs:
            lo, hi = min(rs), max(rs)
            rows.append("  %-31s uslab/best %.2f (at %s) .. %.2f (at %s); leads at %d of %d %s"
                        % (label, lo[0], lo[1], hi[0], hi[1], sum(1 for r in rs if r[0] < 0.995), len(rs),
                           "sizes" if table == "nalloc" else "N"))
    if rows:
        out.append("uslab-bench, %s against the best peer (medians; below 1.00 uslab is faster):" % U)
        out += rows
    ws = list(dict.fromkeys(k[1] for k in data if k[0] == M))
    cells = []
    for w in ws:
        t = ratio(M, w, "uslab", "time s")
        r = ratio(M, w, "uslab", "peak RSS MB")
        if t or r:
            cells.append("%s %s/%s" % (w, "%.2f" % t[0] if t else "-", "%.2f" % r[0] if r else "-"))
    if cells:
        out.append("uslab-mbench, uslab/best peer, time/peak RSS:")
        line = " "
        for c in cells:
            if len(line) + len(c) > 100:
                out.append(line)
                line = " "
            line += " " + c + ";"
        out.append(line.rstrip(";"))
    order, med, _ = redis
    if med:
        out.append("redis RSS MB after loading / after FLUSHALL + idle: " +
                   "; ".join("%s %.0f/%.0f" % (disp(a), med[a][1], med[a][4]) for a in order))
    if kernel:
        suites, _, vals = kernel
        cells = []
        for su in suites:
            best = min(((vals[(su, pr)][0], pr) for pr in PEERS if (su, pr) in vals), default=None)
            if best and (su, "uslab") in vals:
                cells.append("%s %.2f (%s)" % (su, vals[(su, "uslab")][0] / best[0], disp(best[1])))
        if cells:
            out.append("kernel's test suites, uslab/best peer's time: " + "; ".join(cells))
    if any("gperftools" in line for line in out):
        out.append(gperftools_note(meta))
    return out


# ------------------------------------------------------------------ the report


def load_raw(raw):
    """The run's raw/: meta.json ({} if it cannot be read), the --data lines,
    the parts' exit statuses, the redis and kernel tables."""
    meta = {}
    try:
        with open(os.path.join(raw, "meta.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        pass
    return meta, read_data(raw), read_parts(raw), read_redis(raw), read_kernel(raw)


def draw_plots(d, meta, data, redis, kernel):
    """DIR/*.png afresh; the Plotter, which knows what it made and what it left out."""
    for f in os.listdir(d):
        if f.endswith(".png"):
            os.remove(os.path.join(d, f))
    p = Plotter(d)
    p.meta = meta
    try:
        plot_all(p, data, redis)
    except Exception as e:    # a bug in one plot must not lose the tables
        p.missing.append(("the remaining plots", "the generator failed: %r" % e))
    try:
        plot_kernel(p, kernel)
    except Exception as e:
        p.missing.append(("the kernel suites' plot", "the generator failed: %r" % e))
    p.close()
    return p


def report_header(meta, total):
    """The title, the quick-mode note and the table of the run's facts, how to read the numbers, the peers."""
    quick = meta.get("mode") == "quick"
    v = meta.get("versions", {})
    L = []
    L.append("# uslab benchmark report%s\n" % (" (quick mode)" if quick else ""))
    if quick:
        L.append("**Quick mode** (`bash scripts/bench.sh quick`): small counts and 3 runs per allocator (the redis "
                 "scenario: one round of 300k keys); the numbers are noisier than a full run's and not comparable "
                 "with its absolute values.\n")
    L.append("Written by `scripts/bench.sh` (tables: the programs' own output; plots: `scripts/bench_report.py`, "
             "gnuplot). Regenerate the report from `raw/` with `python3 scripts/bench_report.py report "
             "bench/report`.\n")
    L.append("| | |\n|---|---|")
    L.append("| date | %s%s |" % (meta.get("date", "?"), "; the parts ran %s" % fmt_secs(total["secs"]) if total else ""))
    L.append("| command | `%s` |" % meta.get("command", "?"))
    L.append("| mode | %s |" % ("quick" if quick else "full"))
    L.append("| machine | %s, %s CPUs, %s RAM; load average at the start %s |"
             % (meta.get("cpu", "?"), meta.get("ncpu", "?"), meta.get("memory", "?"), meta.get("loadavg", "?")))
    L.append("| system | Debian %s, Linux %s, %s |" % (meta.get("debian", "?"), meta.get("kernel", "?"),
                                                     meta.get("compiler", "?")))
    L.append("| libraries | libc6 %s, libjemalloc2 %s, libtcmalloc-minimal4 %s (shown as gperftools), libmimalloc2.0 %s, "
             "redis-server %s |"
             % (v.get("libc6", "?"), v.get("libjemalloc2", "?"), v.get("libtcmalloc-minimal4", "?"),
                v.get("libmimalloc2.0", "?"), v.get("redis-server", "?")))
    subj = meta.get("commit_subject", "").replace("|", "/")
    if len(subj) > 90:
        subj = subj[:subj.rfind(" ", 0, 90)] + " ..."
    L.append("| uslab | commit `%s`%s: %s |" % (meta.get("commit", "?")[:12],
                                              " with uncommitted changes" if meta.get("dirty") else "", subj))
    L.append("")
    L.append("**All numbers are medians** over runs, each run a process of its own per allocator, runs interleaved "
             "(lower is better everywhere). Ranges: the `uslab-mbench` tables give the time's `(min..max)` over the "
             "runs; the `uslab-bench` and `uslab-dbench` tables print medians only (the plots' whiskers show the "
             "least..greatest run, from `raw/data.tsv`); the redis tables give the spread (max - min) over the "
             "rounds. The machine is shared and noisy: compare numbers from one run only.\n")
    L.append("**The peers:** glibc's malloc, jemalloc, gperftools and mimalloc, each from Debian. %s; its "
             "rows, columns and plots are named gperftools (in `raw/data.tsv`, `raw/redis.tsv` and `raw/kernel.tsv` "
             "its key is still `tcmalloc`; tables in `raw/` from runs before the rename say tcmalloc).\n"
             % gperftools_note(meta))
    return L


def report_summary(data, parts, redis, meta, kernel):
    """The summary lines, and the parts that failed."""
    L = []
    L.append("## Summary\n")
    L.append(fence("\n".join(summary_lines(data, parts, redis, meta, kernel)) or "(no data)"))
    bad = [pt for pt in parts if pt["name"] != "total" and pt["rc"] != "0"]
    if bad:
        L.append("**Failed parts:** %s (see their notes below).\n"
                 % ", ".join("%s (exit %s)" % (pt["name"], pt["rc"]) for pt in bad))
    return L


def report_plots(p):
    """Every plot made, with its caption; those left out and why."""
    L = []
    L.append("## Plots\n")
    for png, title, cap in p.made:
        L.append("**%s**  \n%s\n" % (title, cap))
        L.append("![%s](%s)\n" % (title.replace("[", "(").replace("]", ")"), png))
    if p.missing:
        L.append("Plots left out:\n")
        for title, why in p.missing:
            L.append("* %s: %s" % (title, why))
        L.append("")
    return L


def report_programs(raw):
    """uslab-bench's, uslab-mbench's and uslab-dbench's output, a section per table, and their stderr notes."""
    L = []
    sections = [
        ("uslab-bench", "uslab-bench: the seed benchmarks",
         "uslab's kmem_cache API on both engines (SLUB with sheaves or the cpu slab, SLAB), in rseq and locked "
         "mode, uslab's malloc, and the peers' malloc; ns, ticks or cycles per operation."),
        ("uslab-mbench", "uslab-mbench: malloc workloads and real programs",
         "Every allocator through LD_PRELOAD; wall time and peak RSS."),
        ("uslab-dbench", "uslab-dbench: the debug caches",
         "What USLAB_DEBUG costs, and which heap misuse each allocator finds."),
    ]
    for prog, head, what in sections:
        L.append("## %s\n" % head)
        L.append(what + "\n")
        text = read(os.path.join(raw, prog + ".txt"))
        if not text or not text.strip():
            L.append("*No output: this part did not run or printed nothing.*\n")
        else:
            for title, block in split_sections(text):
                if title is None:
                    L.append(fence(block))
                    continue
                name, desc = describe(prog, title)
                L.append("### %s\n" % name)
                if desc:
                    L.append(desc + "\n")
                L.append(fence(block))
        notes = stderr_notes(read(os.path.join(raw, prog + ".err")))
        if notes:
            L.append("Messages on stderr (failures and notes):\n")
            L.append(fence("\n".join(notes)))
    return L


def report_redis(raw):
    """The redis scenario's tables and its per-round log."""
    L = []
    L.append("## redis-server: memory on a real server\n")
    L.append("Debian's redis 7.0 loads keys, deletes 80% of them, loads as many again, then FLUSHALL and idles; RSS "
             "in MB at each point (bench/redis/README.md).\n")
    text = read(os.path.join(raw, "redis.txt"))
    if not text or not text.strip():
        L.append("*No output: this part did not run or printed nothing.*\n")
    else:
        L.append(text.strip() + "\n")
    log = [x for x in (read(os.path.join(raw, "redis.err")) or "").splitlines()
           if x.strip() and not x.startswith("== bench.sh: ")]
    if log:
        L.append("Per-round log (stderr):\n")
        L.append(fence("\n".join(log)))
    return L


def report_others(raw, p):
    """The Rust crate's, the RCU benchmark's and the kernel suites' output."""
    L = []
    L.append("## Rust: the uslab crate\n")
    L.append("bindings/rust: `uslab::Uslab` as `#[global_allocator]` against the mimalloc and tikv-jemallocator "
             "crates and the system allocator, and `KmemCache<T>` against `Box<T>` and the slab and sharded-slab "
             "crates (bench/rust/run.py; ns per operation, medians).\n")
    L.append(part_output(raw, "rust.txt"))
    L.append("## RCU: kfree_rcu against call_rcu per object\n")
    L.append("uslab-rcubench: writers replace objects and retire the old ones after a grace period of liburcu "
             "(memb), uslab's `kfree_rcu` (per-CPU RCU sheaves, to the barn whole) against `call_rcu` with a callback that calls `free`, "
             "each allocator under LD_PRELOAD; throughput and peak RSS, medians.\n")
    L.append(part_output(raw, "rcu.txt"))
    L.append("## The kernel's own test suites\n")
    L.append("The kernel's own user-space suites of linux-source-6.12 (tools/testing/radix-tree: xarray, "
             "multiorder and maple by default), built twice by scripts/kernel-suites.sh: with uslab's adapter "
             "(tests/kernel/: every kmem_cache call on a uslab cache) and with the kernel's own shim (kmem_cache "
             "over malloc and a mutex) run on each peer (bench/kernel/suites_time.sh). idr-test and main, mostly "
             "loops that run for a set time, are timed only on request (`bash scripts/bench.sh kernel --suites "
             "\"idr-test:1 main:1\"`).\n")
    L.append(part_output(raw, "kernel-suites.txt"))
    L += ["![%s](%s)\n" % (t, png) for png, t, _ in p.made if png == "kernel-suites.png"]
    return L


def report(d):
    raw = os.path.join(d, "raw")
    meta, data, parts, redis, kernel = load_raw(raw)
    p = draw_plots(d, meta, data, redis, kernel)
    quick = meta.get("mode") == "quick"
    total = next((pt for pt in parts if pt["name"] == "total"), None)
    L = report_header(meta, total)
    L += report_summary(data, parts, redis, meta, kernel)
    L += report_plots(p)
    L += report_programs(raw)
    L += report_redis(raw)
    L += report_others(raw, p)
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("\n".join(L))

    print("\n== bench.sh: %s run done%s ==" % ("quick" if quick else "full",
                                               " in " + fmt_secs(total["secs"]) if total else ""))
    for line in summary_lines(data, parts, redis, meta, kernel):
        print(line)
    print("report: %s (%d plots%s); raw output in %s/"
          % (os.path.join(d, "README.md"), len(p.made),
             "; left out: " + ", ".join(t.split(":")[0] for t, _ in p.missing) if p.missing else "", raw))


def main(argv):
    if len(argv) >= 2 and argv[0] == "meta":
        mode, command = "full", ""
        i = 2
        while i < len(argv):
            if argv[i] == "--mode" and i + 1 < len(argv):
                mode = argv[i + 1]
                i += 2
            elif argv[i] == "--command" and i + 1 < len(argv):
                command = argv[i + 1]
                i += 2
            else:
                i += 1
        raw = os.path.join(argv[1], "raw")
        os.makedirs(raw, exist_ok=True)
        with open(os.path.join(raw, "meta.json"), "w") as f:
            json.dump(collect_meta(mode, command), f, indent=1)
        return 0
    if len(argv) == 2 and argv[0] == "report":
        report(argv[1])
        return 0
    sys.stderr.write("usage: bench_report.py meta DIR --mode full|quick --command CMD\n"
                     "       bench_report.py report DIR\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
