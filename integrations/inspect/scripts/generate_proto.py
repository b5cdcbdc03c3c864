"""Regenerates the committed protobuf code from the repository's `proto/` directory.

Run it after changing `proto/airlock/v1/airlock.proto`:

    python integrations/inspect/scripts/generate_proto.py

It needs the `test` extra (`grpcio-tools`, pinned so the output is reproducible); the test
suite runs it into a temporary directory and fails when the committed files differ.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO_ROOT = HERE.parents[2] / "proto"
PROTO_FILE = "airlock/v1/airlock.proto"
PACKAGE_PROTO = HERE.parent / "src" / "airlock" / "_proto"
GENERATED = ("airlock_pb2.py", "airlock_pb2.pyi")


def generate(out_dir: Path) -> None:
    """Writes `airlock_pb2.py` and `airlock_pb2.pyi` for the contract into `out_dir`."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as scratch:
        args = [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"--python_out={scratch}",
            f"--pyi_out={scratch}",
            str(PROTO_ROOT / PROTO_FILE),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTO_ROOT / PROTO_FILE}")
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in GENERATED:
            shutil.copyfile(Path(scratch) / "airlock" / "v1" / name, out_dir / name)


if __name__ == "__main__":
    generate(PACKAGE_PROTO)
    print(f"wrote {', '.join(GENERATED)} to {PACKAGE_PROTO}", file=sys.stderr)
