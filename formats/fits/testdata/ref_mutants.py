"""For each FITS file named on the command line, write what astropy reads
of it as make.py's describe does (FILE.json and FILE.PATH.bin beside
it); a file astropy cannot read gets FILE.err."""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make  # noqa: E402

warnings.simplefilter("ignore")
for path in sys.argv[1:]:
    d, name = os.path.split(path)
    try:
        make.describe(path, name, d)
    except Exception as e:  # astropy refuses the file: nothing to compare
        with open(path + ".err", "w") as f:
            f.write(repr(e))
