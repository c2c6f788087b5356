"""Check the README's "Break it on purpose" exercises: each change made as the README words it,
in a scratch copy of the lab, and the lesson's twelve run there: as many tests must fail (and
skip) as the README says. CI runs it; so can you, after changing the exercises or the tests:

    python3 tools/break_it.py

Exit 0 if every exercise fails as the README says, 1 (naming the exercise) otherwise.
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBERS = {"No": 0, "One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5}
RUN = ("import unittest, test_model\n"
       "result = unittest.TestResult()\n"
       "test_model.load_tests(None, None, None).run(result)\n"
       "print(len({getattr(t, 'test_case', t).id() for t, _ in result.failures + result.errors}),"
       " len(result.skipped))")


def exercises(readme):
    """(title, old, new, tests failing, tests skipping) of each numbered exercise."""
    section = readme[readme.index("## Break it on purpose"):]
    section = section[:section.index("\n## ", 4)]
    for item in re.split(r"\n(?=\d\. )", section)[1:]:
        item = " ".join(item.split())
        title = re.search(r"\*\*(.+?)\.?\*\*", item).group(1)
        old, new = re.search(r"change `(.+?)` to `(.+?)`", item).groups()
        failing = NUMBERS[re.search(r"(\w+) tests? fails?", item).group(1)]
        skipping = 2 if "The two word-order tests skip" in item else 0
        yield title, old, new, failing, skipping


def main():
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    problems = 0
    for title, old, new, failing, skipping in exercises((ROOT / "README.md").read_text("utf-8")):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(ROOT, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
            source = (Path(tmp) / "model.py").read_text("utf-8")
            if source.count(old) != 1:
                print(f"{title}: model.py does not hold `{old}` exactly once")
                problems += 1
                continue
            (Path(tmp) / "model.py").write_text(source.replace(old, new, 1), "utf-8")
            out = subprocess.run([sys.executable, "-c", RUN], cwd=tmp, capture_output=True,
                                 text=True).stdout.split()
        got = tuple(map(int, out[-2:])) if len(out) >= 2 else None
        print(f"{title}: {got[0] if got else '?'} tests fail and {got[1] if got else '?'} skip; "
              f"the README says {failing} and {skipping}")
        problems += got != (failing, skipping)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
