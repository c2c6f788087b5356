"""Write tests/reference.json: what each forward of model.py computes on the inputs of
tests/diagnosis.py, which holds a learner's functions to these numbers. Only a change to
model.py's math moves them; after one, run: python3 tools/record_reference.py
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import bpe                  # noqa: E402  (the lab's modules live one folder up)
from tests import diagnosis  # noqa: E402

if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    path = os.path.join(ROOT, "tests", "reference.json")
    bpe.write_texts({path: diagnosis.recorded()})
    print(f"wrote {path}")
