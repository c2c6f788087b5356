"""Write tests/reference.json: what each forward of model.py computes on the inputs of
tests/diagnosis.py, and backward's gradients, which it holds a learner's functions to. Only a
change to model.py's math moves them; after one, and after python3 trace_block.py --write, run:
python3 tools/record_reference.py (it writes nothing while block-trace.json is out of date)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bpe                  # noqa: E402  (the lab's modules live one folder up)
import trace_block          # noqa: E402
from tests import diagnosis  # noqa: E402


def record():
    """Write reference.json, unless model.py's trace is not the recorded one (a mistake)."""
    ok, said = trace_block.check()
    if not ok:
        return bpe.report(f"tools/record_reference.py wrote nothing, as python3 trace_block.py "
                          f"--check says: {said}")
    bpe.write_texts({str(diagnosis.REFERENCE): diagnosis.recorded()})
    print(f"wrote {diagnosis.REFERENCE}")
    return 0


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    sys.exit(bpe.run_reporting_problems(record))
