#!/usr/bin/env python3
"""Fails when the modules of any crate in the repository import each other in a circle.

Usage: import-circles.py [REPO_DIR]

A crate is a folder whose Cargo.toml has a [package] and which has a src/ folder. Each .rs file
under src/ is a module: src/a.rs and src/a/mod.rs are `a`, src/a/b.rs is `a::b`, lib.rs and main.rs
are the crate root, and src/bin/ holds separate programs (left out). A module *uses* another when
its code names a path into it that starts with `crate::`, `super::` or `self::`, inside `use` trees
too (`use crate::{a::X, b::{c::Y}}`). Test modules written inline (`#[cfg(test)] mod t { .. }`) are
left out: a unit test may reach anywhere in its crate. Modules that reach each other, directly or
through others, form a circle; every circle is printed with the names that tie it, and the exit
status is 1.

Why this is checked: a circle means no module in it can be read, tested or moved without the
others, and the way out is almost always a small vocabulary item (a type, a constant) moved into a
leaf module of its own.
"""
import os
import re
import sys
from collections import defaultdict

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def code_only(text):
    """The source with comments removed and string and char literals emptied."""
    out = []
    i, n = 0, len(text)
    raw = re.compile(r'(?<![A-Za-z0-9_])(?:b?r)(#*)"')
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            depth = 0
            while i < n:
                if text.startswith("/*", i):
                    depth += 1
                    i += 2
                elif text.startswith("*/", i):
                    depth -= 1
                    i += 2
                    if depth == 0:
                        break
                else:
                    i += 1
            continue
        m = raw.match(text, i)
        if m:
            close = '"' + m.group(1)
            end = text.find(close, m.end())
            i = n if end < 0 else end + len(close)
            out.append('""')
            continue
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
            continue
        if c == "'":
            # A char literal ('x', '\n', '\u{..}'); a lifetime ('a) is left as it is.
            m = re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'").match(text, i)
            if m:
                i = m.end()
                out.append("' '")
                continue
        out.append(c)
        i += 1
    return "".join(out)


def without_inline_tests(text):
    """Drops `#[cfg(test)] mod name { ... }` (and `cfg(all(test, ..))`) blocks."""
    start = re.compile(r"#\[cfg\((?:all\(\s*)?test\b[^\]]*\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
    while True:
        m = start.search(text)
        if m is None:
            return text
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        text = text[: m.start()] + text[i:]


class PathReader:
    """Reads `crate::`/`super::`/`self::` paths, expanding `{..}` groups into one path per leaf."""

    ANCHOR = re.compile(r"(?<![A-Za-z0-9_:])(crate|super|self)\s*::")

    def __init__(self, text):
        self.text = text

    def paths(self):
        for m in self.ANCHOR.finditer(self.text):
            ups, i = 0, m.end()
            anchor = m.group(1)
            if anchor == "super":
                ups = 1
                while True:
                    more = re.compile(r"\s*super\s*::").match(self.text, i)
                    if not more:
                        break
                    ups += 1
                    i = more.end()
            for segments in self._tree(i, [])[0]:
                yield anchor, ups, segments

    def _tree(self, i, prefix):
        text, found, segments = self.text, [], list(prefix)
        while True:
            m = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*|\{|\*)").match(text, i)
            if not m:
                found.append(segments)
                return found, i
            token, i = m.group(1), m.end()
            if token == "*":
                found.append(segments)
                return found, i
            if token == "{":
                while True:
                    if re.compile(r"\s*\}").match(text, i):
                        return found, re.compile(r"\s*\}").match(text, i).end()
                    inner, i = self._tree(i, segments)
                    found.extend(inner)
                    sep = re.compile(r"\s*([,}])").match(text, i)
                    if not sep:
                        return found, i
                    i = sep.end()
                    if sep.group(1) == "}":
                        return found, i
            segments = segments + [token]
            joint = re.compile(r"\s*::").match(text, i)
            if not joint:
                found.append(segments)
                return found, i
            i = joint.end()


def modules_of(src_dir):
    """Maps each module path (a tuple of names) to its file."""
    modules = {}
    for root, _dirs, files in os.walk(src_dir):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            parts = os.path.relpath(path, src_dir)[:-3].split(os.sep)
            if parts[0] == "bin":
                continue
            if parts[-1] == "mod":
                parts.pop()
            if parts in (["lib"], ["main"]):
                parts = []
            modules[tuple(parts)] = path
    return modules


def target_module(modules, here, anchor, ups, segments):
    if anchor == "crate":
        base = ()
    elif anchor == "self":
        base = here
    else:
        base = here[: max(0, len(here) - ups)]
    full = base + tuple(segments)
    for k in range(len(full), -1, -1):
        if full[:k] in modules:
            return full[:k], (full[k] if k < len(full) else None)
    return None, None


def circles(graph):
    """Strongly connected components of more than one node (iterative Tarjan)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def crate_dirs(repo):
    for root, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in ("target", ".git", "node_modules"))
        if "Cargo.toml" in files and os.path.isdir(os.path.join(root, "src")):
            with open(os.path.join(root, "Cargo.toml"), encoding="utf-8", errors="replace") as f:
                if "[package]" in f.read():
                    yield root


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    total = 0
    for crate in crate_dirs(repo):
        modules = modules_of(os.path.join(crate, "src"))
        graph, ties = defaultdict(set), defaultdict(set)
        for here, path in modules.items():
            graph[path]
            with open(path, encoding="utf-8", errors="replace") as f:
                text = without_inline_tests(code_only(f.read()))
            for anchor, ups, segments in PathReader(text).paths():
                target, item = target_module(modules, here, anchor, ups, segments)
                if target is None or modules[target] == path:
                    continue
                graph[path].add(modules[target])
                if item:
                    ties[(path, modules[target])].add(item)
        for component in circles(graph):
            total += 1
            members = set(component)
            print(f"circle in {os.path.relpath(crate, repo)}: {len(component)} files")
            for a in component:
                for b in sorted(graph[a] & members):
                    names = ", ".join(sorted(ties[(a, b)])) or "(the module itself)"
                    print(f"  {os.path.relpath(a, repo)} -> {os.path.relpath(b, repo)}: {names}")
    if total:
        print(f"{total} import circle(s): move the item that ties them into a leaf module")
        return 1
    print("no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
