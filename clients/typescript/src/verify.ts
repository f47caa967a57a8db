// For receivers: check that a webhook came from Herald (Standard Webhooks), with the endpoint's
// signing secret (`whsec_...`, v1: HMAC-SHA256) or its public key (`whpk_...`, v1a: ed25519).
import { createHmac, createPublicKey, timingSafeEqual, verify as verifyEd25519 } from "node:crypto";

import { InvalidSignature } from "./errors.js";

export const TOLERANCE_SECONDS = 5 * 60;
// An ed25519 public key's DER (SubjectPublicKeyInfo) is this prefix and the 32 raw bytes.
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

export type Headers = Record<string, string | string[] | undefined> | globalThis.Headers;

/**
 * The webhook's JSON body, once its signature matches `body` -- the bytes as received, before
 * any parsing -- and its `webhook-timestamp` is within five minutes of now. During a rotation
 * Herald signs with the old and the new secret (or key): either verifies.
 * Throws InvalidSignature otherwise.
 */
export function verify(
  headers: Headers,
  body: string | Uint8Array,
  secret: string,
  now: Date = new Date(),
): unknown {
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !timestamp || !signatures) {
    throw new InvalidSignature("missing webhook-id, webhook-timestamp or webhook-signature");
  }
  const seconds = Number(timestamp);
  if (!/^[0-9]+$/.test(timestamp) || Math.abs(now.getTime() / 1000 - seconds) > TOLERANCE_SECONDS) {
    throw new InvalidSignature("the message timestamp is too old or too new");
  }
  const bytes = typeof body === "string" ? Buffer.from(body) : Buffer.from(body);
  const content = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), bytes]);
  const offered = signatures.split(" ").map((signature) => {
    const comma = signature.indexOf(",");
    return { scheme: signature.slice(0, comma), value: signature.slice(comma + 1) };
  });
  const matched = secret.startsWith("whpk_")
    ? offered.some((s) => s.scheme === "v1a" && ed25519Matches(secret, content, s.value))
    : offered.some((s) => s.scheme === "v1" && hmacMatches(secret, content, s.value));
  if (!matched) {
    throw new InvalidSignature(
      secret.startsWith("whpk_")
        ? "no v1a signature matches the public key"
        : "no v1 signature matches the secret",
    );
  }
  return JSON.parse(bytes.toString("utf8"));
}

function hmacMatches(secret: string, content: Buffer, offered: string): boolean {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
  const expected = createHmac("sha256", key).update(content).digest();
  const given = Buffer.from(offered, "base64");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function ed25519Matches(publicKey: string, content: Buffer, offered: string): boolean {
  const raw = Buffer.from(publicKey.slice(5), "base64");
  if (raw.length !== 32) throw new InvalidSignature("the public key is not an ed25519 key");
  const key = createPublicKey({
    key: Buffer.concat([ED25519_SPKI_PREFIX, raw]),
    format: "der",
    type: "spki",
  });
  try {
    return verifyEd25519(null, content, key, Buffer.from(offered, "base64"));
  } catch {
    return false;
  }
}

function header(headers: Headers, name: string): string | undefined {
  if (headers instanceof globalThis.Headers) return headers.get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}
