"""Search across datasets: ``iowarp search`` from Python.

    hits = iowarp.search("sea surface temperature", within={"lat": (-10, 10)})
    hits[0]["path"]   # a ready .omni path: <mount>/.omni/<dataset>/<var>@lat=-10:10

The daemon answers on its control socket (JSON lines over a Unix
socket, as the CLI asks it); no library is needed, so this works inside
``iowarp run`` too.
"""

import errno
import glob
import hashlib
import json
import os
import socket

from ._lib import Error

DEFAULT_LIMIT = 20


def control_dir():
    """The daemons' socket directory ($IOWARP_CONTROL_DIR, else the
    per-user default the daemon uses)."""
    d = os.environ.get("IOWARP_CONTROL_DIR")
    if d:
        return d
    if os.geteuid() == 0:
        return "/run/iowarp"
    if os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(os.environ["XDG_RUNTIME_DIR"], "iowarp")
    return "/tmp/iowarp-%d" % os.geteuid()


def control_socket(mount=None, directory=None):
    """The control socket of the daemon of mount ($IOWARP_MOUNT, /iowarp):
    named after a hash of the mount path (internal/unixsock.Path)."""
    mount = os.path.normpath(mount or os.environ.get("IOWARP_MOUNT") or "/iowarp")
    directory = directory or control_dir()
    h = hashlib.sha256(mount.encode()).hexdigest()[:12]
    for cand in [os.path.join(directory, h + ".sock")] + glob.glob(os.path.join(glob.escape(directory), "*-" + h + ".sock")):
        if os.path.exists(cand):
            return cand
    raise Error(errno.ENOENT, "no iowarp daemon serves %s (no control socket in %s)" % (mount, directory))


def _filters(within):
    if not within:
        return []
    if isinstance(within, str):
        items = []
        for part in within.split(","):
            dim, _, rng = part.partition("=")
            lo, _, hi = rng.partition(":")
            items.append((dim.strip(), lo.strip(), hi.strip()))
    else:
        items = []
        for dim, rng in dict(within).items():
            lo, hi = rng
            items.append((dim, "" if lo is None else str(lo), "" if hi is None else str(hi)))
    return [{"Dim": d, "Lo": lo, "Hi": hi} for d, lo, hi in items]


def search(query="", within=None, limit=DEFAULT_LIMIT, mount=None, control_dir=None, timeout=120):
    """Variables matching query (BM25 over names, long_name, standard_name,
    units, attributes) inside the coordinate ranges of within (a dict
    {"lat": (-10, 10), "time": ("2024-01-01", "2024-06-30")} or the CLI's
    "lat=-10:10,time=..." string), best first: dicts with dataset,
    variable, score, path (ready .omni path), source, dims, shape, dtype,
    long_name, standard_name, units."""
    sock = control_socket(mount, control_dir)
    req = {"op": "search", "args": {"text": query, "within": _filters(within), "limit": int(limit)}}
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock)
        s.sendall(json.dumps(req).encode() + b"\n")
        f = s.makefile("rb")
        for line in f:
            resp = json.loads(line)
            if resp.get("error"):
                raise Error(errno.EIO, "search: " + resp["error"])
            if "result" in resp:
                return resp["result"].get("hits") or []
        raise Error(errno.EPIPE, "search: the daemon hung up without an answer")
    finally:
        s.close()
