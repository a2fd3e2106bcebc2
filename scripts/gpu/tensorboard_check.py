#!/usr/bin/env python3
"""Prints the scalars of TensorBoard event files (bin/train's [log] tensorboard_dir) and checks
that TensorBoard's own reader sees what a minimal independent reader sees.

usage: tensorboard_check.py PATH [--reader auto|tensorboard|tensorflow|minimal] [--tag TAG]
  PATH: an events.out.tfevents.* file, or a directory (every such file in it, by name).
Prints one line per scalar, "TAG<TAB>STEP<TAB>VALUE", in file order per tag, tags sorted.

Readers:
  tensorboard  tensorboard.backend.event_processing.event_accumulator (the tensorboard package;
               torch.utils.tensorboard imports the same package, so a machine with torch's
               SummaryWriter has it)
  tensorflow   tf.compat.v1.train.summary_iterator (tensorflow.core.util.event_pb2 records)
  minimal      this file: TFRecord framing (u64 length, masked CRC-32C of the length, data,
               masked CRC-32C of the data; every checksum checked) and the protobuf wire format
               of TensorBoard's Event {wall_time 1, step 2, file_version 3, summary 5} /
               Summary {value 1} / Value {tag 1, simple_value 2}, with the Python standard
               library only
  auto         (default) the first of tensorboard, tensorflow that imports, else minimal.
With a library reader the minimal reader runs too and the two must agree (float32 values, the
same steps per tag). Exit status 0 when scalars were found and the readers agree, 1 otherwise.

On the GPU machine, after `build/bin/train CONFIG log.tensorboard_dir=/tmp/tb ...`:
  python3 scripts/gpu/tensorboard_check.py /tmp/tb
"""
import argparse
import glob
import math
import os
import struct
import sys


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path):
    """Yields the payload of every record; ValueError on a bad checksum or a truncated file."""
    with open(path, "rb") as f:
        blob = f.read()
    at = 0
    while at < len(blob):
        if len(blob) - at < 12:
            raise ValueError(f"{path}: truncated record header at byte {at}")
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if length_crc != masked_crc(header):
            raise ValueError(f"{path}: bad length checksum at byte {at}")
        end = at + 12 + length
        if len(blob) < end + 4:
            raise ValueError(f"{path}: truncated record data at byte {at}")
        data = blob[at + 12:end]
        (data_crc,) = struct.unpack("<I", blob[end:end + 4])
        if data_crc != masked_crc(data):
            raise ValueError(f"{path}: bad data checksum at byte {at}")
        yield data
        at = end + 4


def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(buf):
    """Yields (field number, wire type, value) of a protobuf message's fields."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield field, wire, value


def parse_event(data):
    """(wall_time, step, file_version or None, [(tag, simple_value)])."""
    wall_time, step, version, values = 0.0, 0, None, []
    for field, wire, v in _fields(data):
        if field == 1 and wire == 1:
            (wall_time,) = struct.unpack("<d", v)
        elif field == 2 and wire == 0:
            step = v - (1 << 64) if v >= 1 << 63 else v  # int64
        elif field == 3 and wire == 2:
            version = v.decode("utf-8")
        elif field == 5 and wire == 2:
            for sf, sw, sv in _fields(v):
                if sf != 1 or sw != 2:
                    continue
                tag, simple = "", None
                for vf, vw, vv in _fields(sv):
                    if vf == 1 and vw == 2:
                        tag = vv.decode("utf-8")
                    elif vf == 2 and vw == 5:
                        (simple,) = struct.unpack("<f", vv)
                if simple is not None:
                    values.append((tag, simple))
    return wall_time, step, version, values


def read_minimal(files):
    scalars = {}
    for path in files:
        records = list(read_records(path))
        if not records:
            raise ValueError(f"{path}: no records")
        version = parse_event(records[0])[2]
        if version != "brain.Event:2":
            raise ValueError(f"{path}: the first record's file_version is {version!r}, "
                             "expected 'brain.Event:2'")
        for data in records[1:]:
            _, step, _, values = parse_event(data)
            for tag, value in values:
                scalars.setdefault(tag, []).append((step, value))
    return scalars


def read_tensorboard(files):
    from tensorboard.backend.event_processing import event_accumulator as ea
    scalars = {}
    for path in files:
        acc = ea.EventAccumulator(path, size_guidance={ea.SCALARS: 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return scalars


def read_tensorflow(files):
    import tensorflow as tf
    scalars = {}
    for path in files:
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                if v.HasField("simple_value"):
                    scalars.setdefault(v.tag, []).append((event.step, v.simple_value))
    return scalars


READERS = {"tensorboard": read_tensorboard, "tensorflow": read_tensorflow,
           "minimal": read_minimal}


def same(a, b):
    """Scalars equal as float32 (NaN equals NaN)."""
    if a.keys() != b.keys():
        return False
    for tag in a:
        if len(a[tag]) != len(b[tag]):
            return False
        for (sa, va), (sb, vb) in zip(a[tag], b[tag]):
            fa, fb = struct.pack("<f", va), struct.pack("<f", vb)
            if sa != sb or (fa != fb and not (math.isnan(va) and math.isnan(vb))):
                return False
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("path")
    p.add_argument("--reader", default="auto", choices=["auto"] + sorted(READERS))
    p.add_argument("--tag", help="print this tag only")
    a = p.parse_args()
    if os.path.isdir(a.path):
        files = sorted(glob.glob(os.path.join(a.path, "*tfevents*")))
    else:
        files = [a.path]
    if not files:
        print(f"tensorboard_check: no event files in {a.path}", file=sys.stderr)
        return 1
    reader = a.reader
    if reader == "auto":
        reader = "minimal"
        for name, module in (("tensorboard", "tensorboard"), ("tensorflow", "tensorflow")):
            try:
                __import__(module)
                reader = name
                break
            except ImportError:
                pass
    try:
        scalars = READERS[reader](files)
        minimal = scalars if reader == "minimal" else read_minimal(files)
    except ValueError as e:
        print(f"tensorboard_check: {e}", file=sys.stderr)
        return 1
    print(f"tensorboard_check: {len(files)} file(s), {len(scalars)} tags, reader {reader}",
          file=sys.stderr)
    if not same(scalars, minimal):
        print(f"tensorboard_check: the {reader} reader and the minimal reader disagree",
              file=sys.stderr)
        return 1
    for tag in sorted(scalars):
        if a.tag is not None and tag != a.tag:
            continue
        for step, value in scalars[tag]:
            print(f"{tag}\t{step}\t{value!r}")
    return 0 if scalars else 1


if __name__ == "__main__":
    sys.exit(main())
