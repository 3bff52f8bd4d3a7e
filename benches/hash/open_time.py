"""Times opening attune.HashDB: a new database and a reopen of a small existing one.

Each case runs in a fresh child process (so page cache state of the mapping is not shared
between samples); reports the median of N samples of CPU (user + system) and wall seconds.

    .venv/bin/python benches/hash/open_time.py --dir /dev/shm --dir /var/tmp -n 5
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import os, sys, time, json, attune
path, fill = sys.argv[1], int(sys.argv[2])
if fill:
    db = attune.HashDB(path)
    for i in range(fill):
        db.put(i, i)
    db.close()
    sys.exit(0)
t0, c0 = time.perf_counter(), time.process_time()
db = attune.HashDB(path)
t1, c1 = time.perf_counter(), time.process_time()
db.close()
print(json.dumps({"wall": t1 - t0, "cpu": c1 - c0}))
"""


def once(path: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, "0"], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", action="append", default=[], help="parent directory (repeatable)")
    ap.add_argument("-n", type=int, default=5, help="samples per case")
    ap.add_argument("--fill", type=int, default=1000, help="records in the reopened database")
    args = ap.parse_args()
    for parent in args.dir or [tempfile.gettempdir()]:
        for case in ("new", "reopen"):
            samples = []
            for _ in range(args.n):
                root = tempfile.mkdtemp(prefix="hashdb-open-", dir=parent)
                path = os.path.join(root, "db")
                try:
                    if case == "reopen":
                        subprocess.run(
                            [sys.executable, "-c", CHILD, path, str(args.fill)], check=True
                        )
                    samples.append(once(path))
                finally:
                    shutil.rmtree(root, ignore_errors=True)
            row = {
                "dir": parent,
                "case": case,
                "n": args.n,
                "cpu_s": statistics.median(s["cpu"] for s in samples),
                "wall_s": statistics.median(s["wall"] for s in samples),
            }
            print(json.dumps(row))


if __name__ == "__main__":
    main()
