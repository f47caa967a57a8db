// Running a call: authentication, the idempotency key, retries as Herald asks for them -- the
// same rules as the Python client (clients/python/herald_client/_transport.py).
import { randomUUID } from "node:crypto";

import { HeraldError, type Problem } from "./errors.js";

export interface ClientOptions {
  /** Where Herald is, e.g. `https://webhooks.example.com`. */
  baseUrl: string;
  /** A tenant key (`hrk_...`), or an admin key for the admin routes. */
  apiKey: string;
  /** How many times a call is tried again after the first (default 5). */
  maxRetries?: number;
  /** The longest wait, in seconds, the client accepts before a retry (default 60): a longer
   * Retry-After makes the error the answer. */
  maxRetryWait?: number;
  /** The fetch to send with (default: the global one). */
  fetch?: typeof fetch;
}

export type Query = Record<string, string | number | boolean | null | undefined>;

export interface Call {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Query;
  body?: unknown;
  /** An accept: sent with an Idempotency-Key, the same on every retry. */
  keyed?: boolean;
  idempotencyKey?: string | undefined;
}

// Herald's "not now, nothing was done": rate limits (429) and an unavailable database or
// queue, or a transaction conflict (503), each with Retry-After.
const RETRYABLE = new Set([429, 503]);

export class Transport {
  readonly #base: string;
  readonly #key: string;
  readonly #retries: number;
  readonly #mostWait: number;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    this.#base = options.baseUrl.replace(/\/+$/, "");
    this.#key = options.apiKey;
    this.#retries = options.maxRetries ?? 5;
    this.#mostWait = options.maxRetryWait ?? 60;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  async run<T>(call: Call): Promise<T> {
    // One key per call, the same on each of its retries: Herald answers a retry of a request
    // it already accepted with that acceptance, never a second delivery.
    const key = call.keyed ? (call.idempotencyKey ?? `hc-${randomUUID()}`) : undefined;
    // A lost connection may have hidden a call that was done: only a repeatable one is sent
    // again then (reads, PUT and DELETE, and keyed accepts).
    const repeatable = call.method !== "POST" && call.method !== "PATCH" ? true : !!key;
    for (let attempt = 0; ; attempt++) {
      let answer: Response;
      try {
        answer = await this.#fetch(this.#url(call), this.#init(call, key));
      } catch (error) {
        const wait = repeatable && attempt < this.#retries ? backoff(attempt, this.#mostWait) : null;
        if (wait === null) throw error;
        await sleep(wait);
        continue;
      }
      if (RETRYABLE.has(answer.status) && attempt < this.#retries) {
        const asked = retryAfter(answer.headers.get("retry-after"));
        const wait = asked ?? backoff(attempt, this.#mostWait);
        if (wait <= this.#mostWait) {
          await answer.body?.cancel();
          await sleep(wait);
          continue;
        }
      }
      return (await read(answer)) as T;
    }
  }

  #url(call: Call): string {
    const url = new URL(this.#base + call.path);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    }
    return url.toString();
  }

  #init(call: Call, key: string | undefined): RequestInit {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#key}`,
      Accept: "application/json",
    };
    if (key !== undefined) headers["Idempotency-Key"] = key;
    const init: RequestInit = { method: call.method, headers };
    if (call.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(call.body);
    }
    return init;
  }
}

async function read(answer: Response): Promise<unknown> {
  const text = await answer.text();
  if (answer.status >= 400) {
    let problem: Problem;
    try {
      problem = JSON.parse(text) as Problem;
    } catch {
      problem = { type: "about:blank", title: answer.statusText, status: answer.status };
    }
    throw new HeraldError(answer.status, problem);
  }
  return text ? JSON.parse(text) : undefined;
}

/** Retry-After in seconds, given as seconds or as an HTTP date; null when absent or unreadable. */
export function retryAfter(said: string | null): number | null {
  if (said === null) return null;
  const seconds = Number(said);
  if (said.trim() !== "" && Number.isFinite(seconds)) return Math.max(seconds, 0);
  const when = Date.parse(said);
  return Number.isNaN(when) ? null : Math.max((when - Date.now()) / 1000, 0);
}

function backoff(attempt: number, mostWait: number): number {
  return Math.min(mostWait, 0.5 * 2 ** attempt) * (0.5 + Math.random() / 2);
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}
