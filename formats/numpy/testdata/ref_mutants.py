"""For each .npy or .npz file on the command line, write what numpy.load
reads of it in the OMNI form make.py's record writes (FILE.NAME.want,
NAME "array" for a .npy, the member for an .npz); nothing for a file or
member numpy refuses."""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make  # noqa: E402

warnings.simplefilter("ignore")
for path in sys.argv[1:]:
    make.out = os.path.dirname(path)
    base = os.path.basename(path)
    try:
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                for k in z.files:
                    try:
                        make.record(base + "." + k.replace("/", "~"), z[k])
                    except Exception:
                        pass
        else:
            make.record(base + ".array", np.load(path, allow_pickle=False))
    except Exception:
        pass
