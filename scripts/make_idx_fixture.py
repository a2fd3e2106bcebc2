#!/usr/bin/python3
"""Writes tests/io/fixtures/: small Megatron MMapIndexedDataset files made the way Megatron's
numpy code makes them (megatron/data/indexed_dataset.py: MMapIndexedDatasetBuilder and
MMapIndexedDataset.Index.writer), as an independent reference for anvil's C++ writer and reader.

Run with Debian's python3 + python3-numpy (no torch needed):
    /usr/bin/python3 scripts/make_idx_fixture.py [out_dir]

Outputs, per variant NAME in (u16, i32):
    megatron_NAME.bin / megatron_NAME.idx   the dataset
    megatron_NAME.txt                        the documents: one sequence per line (space-separated
                                             token ids), a blank line after each document
The documents mirror what tools/preprocess_data.py feeds the builder: sentence-split documents
have several sequences, empty sentences and empty documents never reach the builder.
"""
import os
import struct
import sys

import numpy as np

# Megatron's dtype codes (BigScience fork; 7 is left out on purpose, see DESIGN.md §6).
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
          8: np.uint16}
HDR_MAGIC = b'MMIDIDX\x00\x00'


def code(dtype):
    for k, v in DTYPES.items():
        if v == dtype:
            return k
    raise ValueError(dtype)


def best_fitting_dtype(vocab_size):
    # megatron/data/indexed_dataset.py: __best_fitting_dtype
    if vocab_size is not None and vocab_size < 65500:
        return np.uint16
    return np.int32


class IndexWriter:
    """MMapIndexedDataset.Index.writer: header at enter, arrays at write()."""

    def __init__(self, path, dtype):
        self._path = path
        self._dtype = dtype

    def __enter__(self):
        self._file = open(self._path, 'wb')
        self._file.write(HDR_MAGIC)
        self._file.write(struct.pack('<Q', 1))
        self._file.write(struct.pack('<B', code(self._dtype)))
        return self

    def _get_pointers(self, sizes):
        dtype_size = self._dtype().itemsize
        address = 0
        pointers = []
        for size in sizes:
            pointers.append(address)
            address += size * dtype_size
        return pointers

    def write(self, sizes, doc_idx):
        pointers = self._get_pointers(sizes)
        self._file.write(struct.pack('<Q', len(sizes)))
        self._file.write(struct.pack('<Q', len(doc_idx)))
        self._file.write(np.array(sizes, dtype=np.int32).tobytes(order='C'))
        self._file.write(np.array(pointers, dtype=np.int64).tobytes(order='C'))
        self._file.write(np.array(doc_idx, dtype=np.int64).tobytes(order='C'))

    def __exit__(self, exc_type, exc_val, exc_tb):
        self._file.close()


class Builder:
    """MMapIndexedDatasetBuilder: .bin streamed, sizes/doc_idx kept, .idx at finalize()."""

    def __init__(self, out_file, dtype):
        self._data_file = open(out_file, 'wb')
        self._dtype = dtype
        self._sizes = []
        self._doc_idx = [0]

    def add_item(self, tokens):
        np_array = np.array(tokens, dtype=self._dtype)
        self._data_file.write(np_array.tobytes(order='C'))
        self._sizes.append(np_array.size)

    def end_document(self):
        self._doc_idx.append(len(self._sizes))

    def finalize(self, index_file):
        self._data_file.close()
        with IndexWriter(index_file, self._dtype) as index:
            index.write(self._sizes, self._doc_idx)


def read_back(prefix):
    """MMapIndexedDataset.Index.__init__ + get(): the numpy reader, as a self-check."""
    with open(prefix + '.idx', 'rb') as stream:
        assert stream.read(9) == HDR_MAGIC
        assert struct.unpack('<Q', stream.read(8)) == (1,)
        (dtype_code,) = struct.unpack('<B', stream.read(1))
        dtype = DTYPES[dtype_code]
        (length,) = struct.unpack('<Q', stream.read(8))
        (doc_count,) = struct.unpack('<Q', stream.read(8))
        offset = stream.tell()
    buf = np.memmap(prefix + '.idx', mode='r', order='C')
    sizes = np.frombuffer(buf, dtype=np.int32, count=length, offset=offset)
    pointers = np.frombuffer(buf, dtype=np.int64, count=length, offset=offset + sizes.nbytes)
    doc_idx = np.frombuffer(buf, dtype=np.int64, count=doc_count,
                            offset=offset + sizes.nbytes + pointers.nbytes)
    bin_buf = np.memmap(prefix + '.bin', mode='r', order='C')
    seqs = [np.frombuffer(bin_buf, dtype=dtype, count=int(s), offset=int(p)).tolist()
            for s, p in zip(sizes, pointers)]
    return dtype, seqs, doc_idx.tolist()


# Documents as lists of sequences (sentences). Token values exercise each dtype's extremes.
DOCS = {
    'u16': (best_fitting_dtype(50257), [
        [[1, 2, 3, 4, 5]],
        [[50256, 0, 65535, 256]],
        [[7, 8], [9, 10, 11], [12]],  # a sentence-split document: three sequences
        [[42]],
        [list(range(100, 400, 3))],
        [[31, 32, 33], [34]],
    ]),
    'i32': (best_fitting_dtype(250880), [
        [[0, 1, 65536, 250879]],
        [[2147483647, 65535, 65500]],
        [[5, 6, 7], [8]],
        [list(range(70000, 70500, 7))],
    ]),
}


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'io', 'fixtures'))
    os.makedirs(out_dir, exist_ok=True)
    for name, (dtype, docs) in DOCS.items():
        prefix = os.path.join(out_dir, 'megatron_' + name)
        builder = Builder(prefix + '.bin', dtype)
        for doc in docs:
            for sentence in doc:
                builder.add_item(sentence)
            builder.end_document()
        builder.finalize(prefix + '.idx')
        with open(prefix + '.txt', 'w') as f:
            for doc in docs:
                for sentence in doc:
                    f.write(' '.join(str(t) for t in sentence) + '\n')
                f.write('\n')
        got_dtype, seqs, doc_idx = read_back(prefix)
        assert got_dtype == dtype
        assert seqs == [s for doc in docs for s in doc]
        assert doc_idx[0] == 0 and doc_idx[-1] == len(seqs) and len(doc_idx) == len(docs) + 1
        print('wrote %s.{bin,idx,txt}: %d documents, %d sequences, %s' %
              (prefix, len(docs), len(seqs), np.dtype(dtype).name))


if __name__ == '__main__':
    main()
