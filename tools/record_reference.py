"""Write tests/reference.json: what each forward of model.py computes on the inputs of
tests/diagnosis.py, which holds a learner's functions to these numbers. Only a change to
model.py's math moves them; after one, run: python3 tools/record_reference.py
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bpe                  # noqa: E402  (the lab's modules live one folder up)
from tests import diagnosis  # noqa: E402

if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    bpe.write_texts({str(diagnosis.REFERENCE): diagnosis.recorded()})
    print(f"wrote {diagnosis.REFERENCE}")
