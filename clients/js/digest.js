// SHA-256 of files and streams, and the Content-Digest header (RFC 9530).

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

/** Bytes read at a time when hashing or uploading a file: memory stays at this, whatever its size. */
export const CHUNK = 1 << 20;

/**
 * Read the file at path and resolve to its SHA-256 (a 32-byte Buffer) and
 * size in bytes, CHUNK bytes at a time.
 */
export async function fileSha256(path) {
  const h = createHash('sha256');
  let size = 0;
  for await (const b of createReadStream(path, { highWaterMark: CHUNK })) {
    h.update(b);
    size += b.length;
  }
  return { sha256: h.digest(), size };
}

/** The Content-Digest field value for a SHA-256 (RFC 9530 section 2): sha-256=:BASE64:. */
export function contentDigest(sha256) {
  if (sha256.length !== 32) throw new RangeError(`a SHA-256 is 32 bytes, not ${sha256.length}`);
  return `sha-256=:${Buffer.from(sha256).toString('base64')}:`;
}

const MEMBER = /^\s*([a-z0-9_-]+)\s*=\s*:([A-Za-z0-9+/=]*):\s*$/;

/**
 * The SHA-256 (a Buffer) a Content-Digest or Repr-Digest field value
 * gives, or null when it gives none (other algorithms are ignored).
 * Throws for a sha-256 member that is not 32 bytes of base64.
 */
export function parseContentDigest(value) {
  for (const member of value.split(',')) {
    const m = MEMBER.exec(member);
    if (m && m[1] === 'sha-256') {
      const d = Buffer.from(m[2], 'base64');
      if (d.length !== 32 || d.toString('base64') !== m[2]) {
        throw new RangeError(`Content-Digest: sha-256 is not 32 bytes of base64`);
      }
      return d;
    }
  }
  return null;
}
