import type { components } from "./openapi.js";

export type Problem = components["schemas"]["Problem"];

/** Herald answered with an error: its status and its problem document (RFC 9457). */
export class HeraldError extends Error {
  readonly status: number;
  readonly problem: Problem;

  constructor(status: number, problem: Problem) {
    super(`${status} ${problem.title}${problem.detail ? `: ${problem.detail}` : ""}`);
    this.name = "HeraldError";
    this.status = status;
    this.problem = problem;
  }
}

/** A webhook's signature does not match its body, or its timestamp is too old or too new. */
export class InvalidSignature extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidSignature";
  }
}
