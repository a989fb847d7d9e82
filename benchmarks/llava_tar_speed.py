"""Throughput of the llava-tar adapter on a generated DRAKE-style tar (no network).

Writes ``<Dataset>.tar`` with N records of K JPEG images each (the released layout), then times
the two passes separately: ``convert`` (index the tar, parse records, parse choices, decode-check
every image) and ``sample`` (read the image bytes by offset), and prints records/s and images/s.

    python benchmarks/llava_tar_speed.py [--records 2000] [--images 2] [--side 224]
"""

from __future__ import annotations

import argparse
import io
import json
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from drake.adapters import AdapterOptions
from drake.adapters.llava_tar import LlavaTarAdapter
from drake.registry import get_benchmark


def write_tar(path: Path, records: int, images: int, side: int) -> None:
    rng = np.random.default_rng(0)
    pool = []
    for _ in range(64):  # 64 distinct pictures, reused: each reference is decode-checked
        buf = io.BytesIO()
        pixels = rng.integers(0, 255, (side, side, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(buf, format="JPEG", quality=85)
        pool.append(buf.getvalue())
    rows = []
    with tarfile.open(path, "w") as tf:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))

        for r in range(records):
            names = [f"IRFL/images/{r}_{k}.jpg" for k in range(images)]
            for k, name in enumerate(names):
                add(name, pool[(r + k) % len(pool)])
            prompt = ("Which image fits? " + " ".join(f"Image {chr(65 + k)}: <image>"
                                                       for k in range(images))
                      + "\nChoice list:[" + ", ".join(f"Image {chr(65 + k)}"
                                                      for k in range(images)) + "]")
            rows.append({"id": str(r), "image": [f"dataset/{n}" for n in names],
                         "conversations": [{"from": "human", "value": prompt},
                                           {"from": "gpt", "value": "Image A"}]})
        add("IRFL/train/dataset-1.json", json.dumps(rows).encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--images", type=int, default=2)
    parser.add_argument("--side", type=int, default=224)
    args = parser.parse_args()
    task = get_benchmark("drake").task("IRFL-1")
    with tempfile.TemporaryDirectory() as tmp:
        write_tar(Path(tmp) / "IRFL.tar", args.records, args.images, args.side)
        adapter = LlavaTarAdapter(AdapterOptions(source_dir=Path(tmp)))
        t0 = time.perf_counter()
        conv = adapter.convert(task, "train")
        t1 = time.perf_counter()
        for i, rec in enumerate(conv.kept):
            adapter.sample(task, "train", rec, i)
        t2 = time.perf_counter()
    n, imgs = len(conv.kept), len(conv.kept) * args.images
    print(f"{args.records} records x {args.images} JPEG {args.side}px, kept {n}")
    print(f"convert: {t1 - t0:6.2f} s  {n / (t1 - t0):8.0f} records/s  {imgs / (t1 - t0):8.0f} "
          f"images/s (decode-checked)")
    print(f"sample:  {t2 - t1:6.2f} s  {n / (t2 - t1):8.0f} records/s  {imgs / (t2 - t1):8.0f} "
          f"images/s (bytes by offset)")


if __name__ == "__main__":
    main()
