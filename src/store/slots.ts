/**
 * Redis Cluster's key → slot mapping (CRC16/XMODEM of the hash tag, or of the whole key when it
 * has none, modulo 16384), for grouping commands per slot and for choosing queue partition tags.
 */
export const SLOT_COUNT = 16384;

const TABLE = Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit += 1) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  return crc;
});

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/** The slot of a key: only the part between the first `{` and the next `}` counts, when not empty. */
export function slotOf(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key)) % SLOT_COUNT;
}
