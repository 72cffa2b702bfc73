#!/usr/bin/env python3
"""Tests of check_layers.py on small made-up trees: a tree whose layers hold passes, and each kind
of problem (an include of a library not linked, libraries linking in a cycle, folders including
each other, a layer table that disagrees with the graph, bad input) fails with its message.

  scripts/check_layers_test.py   (Python 3 standard library; exit 0 when every test passes)
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")

# The made-up project: base/ (header-only kiln_base and kiln_json), low/ (kiln_low, on base),
# high/ (kiln_high, on low) and app/ (an executable on high).
TABLE = """\
# Architecture

## Layers and libraries

| folder | CMake target | what is there | depends on |
|---|---|---|---|
| `base/` | `kiln_base` (headers), `kiln_json` | errors, JSON | — |
| `low/` | `kiln_low` | the low layer | `base`, `kiln_json` |
| `high/` | `kiln_high` | the high layer | `low` |
| `app/` | `app` | the program | everything |

## Next section
"""


class Tree:
    """A source tree, its build folder with kiln_targets.json, and a run of the script on it."""

    def __init__(self, root):
        self.root = root
        self.build = os.path.join(root, "build")
        self.targets = {}
        self.write("base/error.h", "#pragma once\n")
        self.write("base/json.h", '#pragma once\n#include "base/error.h"\n')
        self.write("base/json.cc", '#include "base/json.h"\n')
        self.write("low/low.h", '#pragma once\n#include "base/error.h"\n')
        self.write("low/low.cc", '#include "low/low.h"\n#include "base/json.h"\n')
        self.write("low/detail.h", "#pragma once\n")  # no .cc: the folder's only library's
        self.write("high/high.h", '#pragma once\n#include "low/low.h"\n')
        self.write("high/high.cc", '#include "high/high.h"\n#include "low/detail.h"\n')
        self.write("app/main.cc", '#include "high/high.h"\n#include <vector>\n')
        self.write("docs/architecture.md", TABLE)
        self.target("kiln_warnings", "INTERFACE_LIBRARY", "", [], [])
        self.target("kiln_base", "INTERFACE_LIBRARY", "base", [], [])
        self.target("kiln_json", "STATIC_LIBRARY", "base", ["json.cc"],
                    ["kiln_base", "kiln_warnings"])
        self.target("kiln_low", "STATIC_LIBRARY", "low", ["low.cc"],
                    ["kiln_base", "$<LINK_ONLY:kiln_json>", "Threads::Threads"])
        self.target("kiln_high", "STATIC_LIBRARY", "high", ["high.cc"], ["kiln_low"])
        self.target("app", "EXECUTABLE", "app", ["main.cc"], ["kiln_high", "kiln_warnings"])

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def target(self, name, kind, folder, sources, links):
        self.targets[name] = {"name": name, "type": kind,
                              "source_dir": os.path.join(self.root, folder).rstrip("/"),
                              "sources": sources, "links": links}

    def run(self):
        os.makedirs(self.build, exist_ok=True)
        path = os.path.join(self.build, "kiln_targets.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"source_dir": self.root, "binary_dir": self.build,
                       "targets": list(self.targets.values())}, f)
        p = subprocess.run([sys.executable, SCRIPT, "--targets", path, "--root", self.root],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.tree = Tree(os.path.realpath(self.tmp.name))

    def tearDown(self):
        self.tmp.cleanup()

    def assert_fails_with(self, *messages):
        code, out = self.tree.run()
        self.assertEqual(code, 1, out)
        for m in messages:
            self.assertIn(m, out)
        return out

    def test_a_tree_whose_layers_hold_passes(self):
        code, out = self.tree.run()
        self.assertEqual(code, 0, out)
        self.assertIn("every include within its layers", out)

    def test_an_include_of_a_library_not_linked_fails_naming_file_line_and_fix(self):
        self.tree.write("low/low.cc", '#include "low/low.h"\n#include "base/json.h"\n'
                                      '#include "high/high.h"\n')
        self.assert_fails_with(
            "low/low.cc:3: includes high/high.h (kiln_high), but kiln_low does not depend on "
            "kiln_high: add it to target_link_libraries(kiln_low ...) or move the code")

    def test_a_header_is_checked_as_its_library(self):
        self.tree.write("base/json.h", '#pragma once\n#include "low/low.h"\n')
        self.assert_fails_with("base/json.h:2: includes low/low.h (kiln_low), but kiln_json does "
                               "not depend on kiln_low")

    def test_an_executable_needs_the_library_too(self):
        self.tree.targets["app"]["links"] = ["kiln_low"]
        self.assert_fails_with("app/main.cc:1: includes high/high.h (kiln_high), but app does not "
                               "depend on kiln_high")

    def test_libraries_linking_in_a_cycle_fail(self):
        self.tree.targets["kiln_low"]["links"].append("kiln_high")
        self.assert_fails_with("libraries link each other in a cycle: kiln_high -> kiln_low -> "
                               "kiln_high")

    def test_folders_including_each_other_fail_even_when_linked_both_ways(self):
        self.tree.targets["kiln_low"]["links"].append("kiln_high")
        self.tree.write("low/low.cc", '#include "low/low.h"\n#include "high/high.h"\n')
        self.assert_fails_with("folders include each other: high/ -> low/ -> high/",
                               "low/low.cc:2 includes high/high.h")

    def test_a_header_two_libraries_of_a_folder_could_own_must_be_listed(self):
        self.tree.write("base/util.h", "#pragma once\n")
        self.tree.write("base/more.cc", "")
        self.tree.targets["kiln_more"] = dict(self.tree.targets["kiln_json"], name="kiln_more",
                                              sources=["more.cc"])
        self.tree.targets["kiln_base"]["sources"] = ["error.h"]
        self.tree.write("base/json.cc", '#include "base/json.h"\n#include "base/util.h"\n')
        self.assert_fails_with("base/util.h: no library owns it (folder base/ has kiln_base, "
                               "kiln_json, kiln_more)")

    def test_the_table_must_name_the_folders_libraries(self):
        self.tree.write("docs/architecture.md", TABLE.replace(", `kiln_json` | errors", " | errors"))
        self.assert_fails_with("the row of base/ does not name its library kiln_json")

    def test_the_table_must_not_name_another_folders_target(self):
        self.tree.write("docs/architecture.md",
                        TABLE.replace("| `kiln_low` |", "| `kiln_low`, `kiln_json` |"))
        self.assert_fails_with("the row of low/ names CMake target kiln_json, which is in base/")

    def test_a_dependency_the_table_claims_must_exist(self):
        self.tree.write("docs/architecture.md", TABLE.replace("| `low` |", "| `low`, `app` |"))
        self.assert_fails_with("the row of high/ says it depends on `app`, but kiln_high do not "
                               "link app")

    def test_a_direct_dependency_the_table_omits_fails_unless_reached_through_another(self):
        self.tree.write("docs/architecture.md",
                        TABLE.replace("| `base`, `kiln_json` |", "| `base` |"))
        out = self.assert_fails_with("the row of low/ does not say it depends on kiln_json")
        self.assertNotIn("row of high/", out)  # it names `low`, through which it has base

    def test_bad_input_is_exit_2_naming_the_file(self):
        os.makedirs(self.tree.build, exist_ok=True)
        path = os.path.join(self.tree.build, "kiln_targets.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write("{not json")
        p = subprocess.run([sys.executable, SCRIPT, "--targets", path], capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("kiln_targets.json: malformed JSON at line 1", p.stderr)
        p = subprocess.run([sys.executable, SCRIPT, "--targets", path + ".missing"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("configure the build first", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
