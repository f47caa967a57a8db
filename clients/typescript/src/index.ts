export * from "./client.js";
export { HeraldError, InvalidSignature, type Problem } from "./errors.js";
export type { components, paths } from "./openapi.js";
export { type ClientOptions, retryAfter } from "./transport.js";
export { TOLERANCE_SECONDS, verify } from "./verify.js";
