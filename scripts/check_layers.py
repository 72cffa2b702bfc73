#!/usr/bin/env python3
"""Checks that Kiln's layers hold: every #include is of a header the including target may use.

The layer graph is the build's own: each target's links (target_link_libraries), as CMake wrote
them at configure time to <build>/kiln_targets.json (cmake/layers.cmake). From it:

  - Each header belongs to one library: the library whose sources list it, or the one whose
    sources hold a .cc of the same name beside it (json.h -> json.cc), or else the library of its
    folder (the nearest folder up that has libraries: its only library, or its header-only one).
  - Each tracked .cc belongs to the targets whose sources list it; a header to its library.
  - An `#include "a/b/c.h"` of a header owned by library L, in a file of target T, needs T == L
    or T depending on L, directly or through other libraries. Otherwise it fails, naming the
    file, the line, the header, both targets and the fix.
  - Libraries must not link in a cycle, and two libraries' folders must not include each other.
  - docs/architecture.md's layer table: for each row, the `kiln_*` names of its "CMake target"
    column are the libraries (and executables) whose folder is the row's, and each name of its
    "depends on" column that is a Kiln library (`kiln_x`, or `x` for kiln_x or for a folder's
    libraries) is one the row's targets depend on; every library a row's targets link directly
    is either named there or reached through one that is. Rows saying "everything" or
    "all of the above" are not checked for completeness.

Python 3 standard library only. Exit 0 when everything holds, 1 with one line per problem, 2 for
bad input (a missing or malformed targets file).

  scripts/check_layers.py --targets build/dev/kiln_targets.json [--root .] [--doc docs/architecture.md]
"""

import argparse
import json
import os
import re
import subprocess
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
LIBRARY_TYPES = {"STATIC_LIBRARY", "SHARED_LIBRARY", "OBJECT_LIBRARY", "MODULE_LIBRARY",
                 "INTERFACE_LIBRARY"}
CXX_SOURCE = (".cc", ".cpp", ".c")
HEADER = (".h", ".hpp")


class InputError(Exception):
    pass


def load_targets(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise InputError(f"cannot read the targets file {path}: {e.strerror} "
                         "(configure the build first: cmake --preset dev)")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: malformed JSON at line {e.lineno}: {e.msg}")
    for key in ("source_dir", "binary_dir", "targets"):
        if key not in doc:
            raise InputError(f"{path}: no '{key}'")
    return doc


class Graph:
    """The project's targets, their files (relative to the source tree) and their links."""

    def __init__(self, doc):
        self.src = os.path.normpath(doc["source_dir"])
        self.bin = os.path.normpath(doc["binary_dir"])
        self.targets = {}
        for t in doc["targets"]:
            self.targets[t["name"]] = t
        self.links = {}     # target -> direct project dependencies
        self.files = {}     # target -> its sources, relative to the source (or build) tree
        self.folder = {}    # target -> its folder, relative to the source tree ("" for the root)
        for name, t in self.targets.items():
            self.folder[name] = self.rel(t["source_dir"])
            self.links[name] = sorted({d for d in (self.link_name(x) for x in t["links"])
                                       if d in self.targets and d != name})
            files = []
            for s in t["sources"]:
                if "$<" in s:
                    continue
                p = s if os.path.isabs(s) else os.path.join(t["source_dir"], s)
                files.append(self.rel(p))
            self.files[name] = files
        self.closure = {}

    def rel(self, path):
        p = os.path.normpath(path)
        for root in (self.bin, self.src):  # the build folder may lie inside the source tree
            if p == root:
                return ""
            if p.startswith(root + os.sep):
                return os.path.relpath(p, root).replace(os.sep, "/")
        return p

    @staticmethod
    def link_name(item):
        m = re.fullmatch(r"\$<LINK_ONLY:([^>]+)>", item)
        return m.group(1) if m else item

    def is_library(self, name):
        return self.targets[name]["type"] in LIBRARY_TYPES

    def deps(self, name):
        """Every target `name` depends on, directly or not."""
        if name not in self.closure:
            seen, todo = set(), list(self.links[name])
            while todo:
                d = todo.pop()
                if d not in seen:
                    seen.add(d)
                    todo.extend(self.links[d])
            self.closure[name] = seen
        return self.closure[name]


def header_owners(graph, headers):
    """header path -> owning library for every header one library owns, and header path -> why
    none does, for a header of a folder whose libraries could each own it."""
    owner, ambiguous = {}, {}
    libs = [n for n in graph.targets if graph.is_library(n)]
    listed, by_stem, by_folder = {}, {}, {}
    for lib in libs:
        if graph.folder[lib]:  # the root's are build helpers (kiln_warnings, kiln_llvm)
            by_folder.setdefault(graph.folder[lib], []).append(lib)
        for f in graph.files[lib]:
            stem, ext = os.path.splitext(f)
            if ext in HEADER:
                listed[f] = lib
            elif ext in CXX_SOURCE:
                by_stem.setdefault(stem, set()).add(lib)
    for h in headers:
        if h in listed:
            owner[h] = listed[h]
            continue
        stem_libs = by_stem.get(os.path.splitext(h)[0], set())
        if len(stem_libs) == 1:
            owner[h] = next(iter(stem_libs))
            continue
        folder = os.path.dirname(h)
        while folder:
            here = by_folder.get(folder, [])
            if here:
                header_only = [n for n in here if not graph.files[n]]
                compiled = [n for n in here
                            if any(f.endswith(CXX_SOURCE) for f in graph.files[n])]
                if len(here) == 1:
                    owner[h] = here[0]
                elif len(header_only) == 1:
                    owner[h] = header_only[0]
                elif len(compiled) == 1:
                    owner[h] = compiled[0]
                else:
                    ambiguous[h] = (f"{h}: no library owns it (folder {folder}/ has "
                                    f"{', '.join(sorted(here))}): list it in the sources of the "
                                    "one it belongs to")
                break
            folder = os.path.dirname(folder)
    return owner, ambiguous


def tracked_files(root):
    """The C and C++ files git tracks under `root`, or (not a checkout) every one there."""
    if os.path.exists(os.path.join(root, ".git")):
        try:
            out = subprocess.run(["git", "ls-files", "-z", "--", "*.cc", "*.h", "*.c", "*.cpp",
                                  "*.hpp"], cwd=root, check=True, capture_output=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            raise InputError(f"git ls-files in {root} failed: {e}")
        return sorted(f for f in out.decode().split("\0") if f)
    files = []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith(".") and s != "build"]
        for n in names:
            if n.endswith(CXX_SOURCE + HEADER):
                files.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    return sorted(files)


def includes_of(root, path):
    try:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if m:
                    yield number, m.group(1)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}")


def strongly_connected(nodes, edges):
    """Tarjan's algorithm: the components with more than one node, each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(1000, 4 * len(nodes) + 100))
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check_includes(graph, root, files):
    problems = []
    known = set(files)
    # Headers generated into the build folder (proto/kiln/v1/*.pb.h) are owned like tracked ones.
    generated = {f for n in graph.targets for f in graph.files[n]}
    headers = sorted({f for f in known | generated if f.endswith(HEADER)} |
                     {os.path.splitext(f)[0] + ".h" for f in generated
                      if f.endswith(".pb.cc") and not os.path.exists(os.path.join(root, f))})
    owner, ambiguous = header_owners(graph, headers)
    users = {}  # source file -> the targets that compile it
    for n in graph.targets:
        for f in graph.files[n]:
            users.setdefault(f, set()).add(n)
    folder_edges, folder_example = {}, {}
    for f in files:
        if f.endswith(HEADER):
            including = {owner[f]} if f in owner else set()
        else:
            including = users.get(f, set())
        if not including:
            continue  # not built in this configuration (or a helper header of no library)
        for line, inc in includes_of(root, f):
            lib = owner.get(inc)
            if lib is None:
                # A header of several libraries' folder, used by one of them, must say whose it
                # is; others no library owns are a test's or a program's helpers.
                if inc in ambiguous and any(graph.is_library(t) for t in including):
                    problems.append(ambiguous.pop(inc))
                continue
            for t in sorted(including):
                if t != lib and lib not in graph.deps(t):
                    problems.append(
                        f"{f}:{line}: includes {inc} ({lib}), but {t} does not depend on {lib}: "
                        f"add it to target_link_libraries({t} ...) or move the code")
            for t in including:
                a, b = graph.folder[t], graph.folder[lib]
                if graph.is_library(t) and a != b:
                    folder_edges.setdefault(a, set()).add(b)
                    folder_example.setdefault((a, b), f"{f}:{line} includes {inc}")
    libs = [n for n in graph.targets if graph.is_library(n)]
    for comp in strongly_connected(libs, {n: graph.links[n] for n in libs}):
        problems.append(f"libraries link each other in a cycle: {' -> '.join(comp + comp[:1])}: "
                        "move the code both need into a library below them")
    for comp in strongly_connected(set(folder_edges) | {b for v in folder_edges.values()
                                                        for b in v}, folder_edges):
        ring = comp + comp[:1]
        why = "; ".join(folder_example[(a, b)] for a, b in zip(ring, ring[1:])
                        if (a, b) in folder_example)
        problems.append(f"folders include each other: {' -> '.join(x + '/' for x in ring)} "
                        f"({why}): move the code that one of them needs into the other, or below "
                        "both")
    return problems


def table_rows(doc_path):
    """(line number, cells) of the first table under '## Layers and libraries'."""
    rows, in_section, in_table = [], False, False
    with open(doc_path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("## "):
                if in_section:
                    break
                in_section = line.strip() == "## Layers and libraries"
                continue
            if not in_section:
                continue
            if line.startswith("|"):
                in_table = True
                cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
                if cells and not set(cells[0]) <= set("-: "):
                    rows.append((number, cells))
            elif in_table:
                break
    if not rows:
        raise InputError(f"{doc_path}: no table under '## Layers and libraries'")
    header = [c.lower() for c in rows[0][1]]
    try:
        cols = (header.index("folder"), header.index("cmake target"), header.index("depends on"))
    except ValueError:
        raise InputError(f"{doc_path}:{rows[0][0]}: the layer table needs the columns 'folder', "
                         "'CMake target' and 'depends on'")
    return [(n, cells[cols[0]], cells[cols[1]], cells[cols[2]]) for n, cells in rows[1:]
            if len(cells) >= len(header)]


def check_doc(graph, doc_path):
    problems = []
    rel_doc = os.path.relpath(doc_path)
    by_folder = {}
    for n in graph.targets:
        by_folder.setdefault(graph.folder[n], set()).add(n)
    for line, folder_cell, target_cell, deps_cell in table_rows(doc_path):
        m = re.fullmatch(r"`([^`]+)/`", folder_cell)
        if not m:
            continue
        folder = m.group(1)
        here = by_folder.get(folder, set())
        # Kiln's libraries, and `_kiln`, the Python package's extension module.
        named = set(re.findall(r"`(kiln[_-][A-Za-z0-9_-]+|_kiln)`", target_cell))
        where = f"{rel_doc}:{line}: the row of {folder}/"
        for n in sorted(named - here):
            if "<" in n:
                continue
            problems.append(f"{where} names CMake target {n}, which "
                            + (f"is in {graph.folder[n]}/" if n in graph.targets
                               else "does not exist") + ": fix the row")
        mine = {n for n in here if graph.is_library(n)}
        for n in sorted(mine - named):
            problems.append(f"{where} does not name its library {n}: add it to the "
                            "'CMake target' column")
        if not mine:
            continue
        reach = set().union(*(graph.deps(n) for n in mine)) - mine
        claimed = set()
        for token in re.findall(r"`([^`]+)`", deps_cell):
            libs = resolve(graph, by_folder, token)
            if not libs:
                continue
            libs -= mine
            if libs and not libs & reach:
                problems.append(f"{where} says it depends on `{token}`, but "
                                f"{', '.join(sorted(mine))} do not link "
                                f"{', '.join(sorted(libs))}: fix the 'depends on' column")
            claimed |= libs & reach
        if re.search(r"everything|all of the above", deps_cell):
            continue
        covered = set(claimed)
        for c in claimed:
            covered |= graph.deps(c)
        direct = {d for n in mine for d in graph.links[n]} - mine
        for d in sorted(direct - covered):
            if not graph.folder[d]:
                continue  # the root's build helpers: warnings, the LLVM wrapper
            problems.append(f"{where} does not say it depends on {d} ({graph.folder[d]}/): "
                            "add it to the 'depends on' column")
    return problems


def resolve(graph, by_folder, token):
    """The libraries a table token names: `kiln_x`, a folder (`compiler/vdla`), `x` (kiln_x) or
    the last part of a folder's name (`autotune`)."""
    token = token.strip()
    if token in graph.targets:
        return {token}
    if "/" in token:
        return {n for n in by_folder.get(token.rstrip("/"), set()) if graph.is_library(n)}
    if "kiln_" + token in graph.targets:
        return {"kiln_" + token}
    libs = set()
    for folder, names in by_folder.items():
        if folder.rstrip("/").split("/")[-1] == token.rstrip("/"):
            libs |= {n for n in names if graph.is_library(n)}
    return libs


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", required=True, help="kiln_targets.json from the build folder")
    ap.add_argument("--root", default=None, help="the source tree (default: the file's own)")
    ap.add_argument("--doc", default=None,
                    help="the architecture page whose layer table is checked "
                         "(default: ROOT/docs/architecture.md; 'none' skips it)")
    args = ap.parse_args(argv)
    try:
        graph = Graph(load_targets(args.targets))
        root = args.root or graph.src
        files = tracked_files(root)
        problems = check_includes(graph, root, files)
        doc = args.doc or os.path.join(root, "docs", "architecture.md")
        if doc != "none":
            problems += check_doc(graph, doc)
    except InputError as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print(f"check_layers: {len(problems)} problems", file=sys.stderr)
        return 1
    libs = sum(1 for n in graph.targets if graph.is_library(n))
    print(f"check_layers: {len(files)} files, {len(graph.targets)} targets ({libs} libraries): "
          "every include within its layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
