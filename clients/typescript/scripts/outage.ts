// One keyed accept through a database outage, for tests/system/test_typescript_client.py: it
// prints each answer's status as it comes ("status 503"), then what it saw, as JSON.
import { Herald } from "../src/index.js";

const seen: [number, string][] = [];
const watching: typeof fetch = async (input, init) => {
  const answer = await fetch(input, init);
  const key = new Headers(init?.headers).get("idempotency-key") ?? "";
  seen.push([answer.status, key]);
  console.log(`status ${answer.status}`);
  return answer;
};
const herald = new Herald({
  baseUrl: process.env.HERALD_URL ?? "",
  apiKey: process.env.HERALD_KEY ?? "",
  maxRetries: 30,
  maxRetryWait: 5,
  fetch: watching,
});
const delivery = await herald.deliveries.create({
  endpoint_id: process.env.ENDPOINT_ID ?? "",
  event_type: "a.b",
  payload: { n: 1 },
});
console.log(JSON.stringify({ delivery: delivery.id, seen }));
