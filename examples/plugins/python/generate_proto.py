"""Regenerates airlock_pb2.py, beside this file, from the repository's proto/ directory.

    python examples/plugins/python/generate_proto.py [OUT_DIR]

Needs grpcio-tools (requirements.txt pins it, so the output is reproducible). The test suite
runs it into a temporary directory and fails when the committed file differs.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO_ROOT = HERE.parents[2] / "proto"
PROTO_FILE = "airlock/v1/airlock.proto"


def generate(out_dir: Path) -> None:
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as scratch:
        args = ["protoc", f"-I{PROTO_ROOT}", f"--python_out={scratch}", str(PROTO_ROOT / PROTO_FILE)]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTO_ROOT / PROTO_FILE}")
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(scratch) / "airlock" / "v1" / "airlock_pb2.py", out_dir / "airlock_pb2.py")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
