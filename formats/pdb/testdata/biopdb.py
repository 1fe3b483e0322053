"""Print, as JSON, every atom Bio.PDB reads from FILE (all alternate
locations), for formats/pdb's comparison."""
import json
import sys
import warnings

from Bio.PDB import MMCIFParser, PDBParser

warnings.simplefilter("ignore")
path = sys.argv[1]
parser = MMCIFParser(QUIET=True) if path.endswith(".cif") else PDBParser(QUIET=True)
s = parser.get_structure("x", path)
out = []
for mi, model in enumerate(s):
    for chain in model:
        for res in chain:
            for a in res.get_unpacked_list():
                het, seq, icode = res.id
                out.append({
                    "model": mi + 1, "serial": a.get_serial_number(), "name": a.get_name(),
                    "altLoc": a.get_altloc().strip(), "resName": res.get_resname(), "chainID": chain.id,
                    "resSeq": seq, "iCode": icode.strip(), "x": float(a.coord[0]), "y": float(a.coord[1]),
                    "z": float(a.coord[2]), "occupancy": a.get_occupancy(), "tempFactor": a.get_bfactor(),
                    "element": a.element,
                })
json.dump(out, sys.stdout)
