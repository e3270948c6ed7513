#!/usr/bin/env python3
"""Every source folder sits on one floor: the folders' #include graph has no cycle.

Reads every .h and .cc under the top-level source folders, takes each `#include "folder/..."`
that names another source folder as an edge folder -> folder, and fails, naming a cycle and the
files that make it, if the graph has one. Prints the floors (lowest first) when it passes.
Usage: layers_test.py [REPO]
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/[^"]+"', re.M)
SKIP = {"build", "build-asan", "build-tsan", "docs", "scripts", ".git", ".ci"}


def folder_graph(repo):
    folders = sorted(d for d in os.listdir(repo)
                     if os.path.isdir(os.path.join(repo, d)) and d not in SKIP and not d.startswith("."))
    edges = {f: {} for f in folders}  # folder -> {included folder: first file that includes it}
    for top in folders:
        for root, _, files in os.walk(os.path.join(repo, top)):
            for name in files:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for target in INCLUDE.findall(f.read()):
                        if target in edges and target != top:
                            edges[top].setdefault(target, os.path.relpath(path, repo))
    return edges


def find_cycle(edges):
    state = {}  # 1: on the stack, 2: done
    stack = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def floors(edges):
    level = {}

    def depth(node):
        if node not in level:
            level[node] = 1 + max((depth(n) for n in edges[node]), default=-1)
        return level[node]

    for node in edges:
        depth(node)
    out = {}
    for node, d in level.items():
        out.setdefault(d, []).append(node)
    return [sorted(out[d]) for d in sorted(out)]


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    edges = folder_graph(repo)
    cycle = find_cycle(edges)
    if cycle:
        print("FAIL: the folders include each other: " + " -> ".join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            print(f"  {a} -> {b}: {edges[a][b]}")
        return 1
    for i, floor in enumerate(floors(edges)):
        print(f"floor {i}: {' '.join(floor)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
