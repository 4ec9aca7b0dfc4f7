"""CRC-32C (Castagnoli) with numpy: the checksum of every TFRecord, such as a TensorBoard event.

    from rl.harness.run.crc32c import crc32c, masked_crc32c

    crc32c(b"123456789")               # 0xE3069283, the CRC-32C check value
    masked_crc32c(record)              # the masked form a TFRecord stores

TensorBoard without TensorFlow computes it byte by byte in Python: 0.6 ms of the 0.73 ms it took to
write a 98-scalar metrics row (docs/performance.md). The CRC is linear over GF(2) once the start
register is set aside, so each byte's share of the result depends only on its value and on how
many bytes follow it. One table lookup per byte, in numpy, gets every share at once; the shares
are XORed block by block, and a Python loop over the blocks (one per BLOCK bytes) moves each
block's sum to its place.
"""

from __future__ import annotations

import numpy as np

_POLYNOMIAL = 0x82F63B78  # Castagnoli, bit-reversed
_START = 0xFFFFFFFF
BLOCK = 256


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLYNOMIAL), table >> 1).astype(np.uint32)
    return table


_TABLE = _byte_table()


def _through_zero_byte(registers: np.ndarray) -> np.ndarray:
    """Registers (uint32) after one more zero byte."""
    return _TABLE[registers & 0xFF] ^ (registers >> 8)


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # share[k, b]: byte b followed by k zero bytes (k < BLOCK), from a zero register.
    shares = np.empty((BLOCK, 256), np.uint32)
    shares[0] = _TABLE
    for k in range(1, BLOCK):
        shares[k] = _through_zero_byte(shares[k - 1])
    # start[r]: the start register after r zero bytes (r < BLOCK).
    start = np.empty(BLOCK, np.uint32)
    start[0] = _START
    for r in range(1, BLOCK):
        start[r] = _through_zero_byte(start[r - 1 : r])[0]
    # skip[j, b]: register byte j holding b, after BLOCK zero bytes; XOR over j moves a register by a block.
    skip = (np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32)[:, None])).astype(np.uint32)
    for _ in range(BLOCK):
        skip = _through_zero_byte(skip)
    return shares, start, skip


_SHARES, _START_AFTER, _SKIP_ARRAY = _tables()
_SKIP = [row.tolist() for row in _SKIP_ARRAY]  # Python ints: the per-block loop indexes them one by one
_DISTANCES = np.arange(BLOCK)


def _skip_block(register: int) -> int:
    return (_SKIP[0][register & 0xFF] ^ _SKIP[1][(register >> 8) & 0xFF]
            ^ _SKIP[2][(register >> 16) & 0xFF] ^ _SKIP[3][register >> 24])


def crc32c(data: bytes) -> int:
    """The CRC-32C of `data` (start and final XOR 0xFFFFFFFF), as TensorBoard's `crc32c` gives it."""
    length = len(data)
    blocks = length // BLOCK + 1  # the last (furthest from the end) is partial or all padding
    # following[q, k]: the byte with q * BLOCK + k bytes after it; zero padding adds nothing (a zero share).
    following = np.zeros(blocks * BLOCK, np.uint8)
    following[:length] = np.frombuffer(data, dtype=np.uint8)[::-1]
    sums = np.bitwise_xor.reduce(_SHARES[_DISTANCES, following.reshape(blocks, BLOCK)], axis=1).tolist()
    # The start register, after the data's partial block: it is moved as that block's sum is.
    sums[-1] ^= int(_START_AFTER[length % BLOCK])
    register = 0
    for block_sum in reversed(sums):  # Horner: the block with the most blocks after it is moved the most
        register = _skip_block(register) ^ block_sum
    return register ^ _START


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of `data` (rotated right by 15 bits, plus a constant)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
