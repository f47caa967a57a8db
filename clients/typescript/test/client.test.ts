// The client against a real `herald api` and `herald worker` (tests/system/test_typescript_client.py
// starts them and passes HERALD_URL and HERALD_ADMIN_KEY), and a real receiver on 127.0.0.1.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import { Herald, HeraldError, InvalidSignature, verify } from "../src/index.js";

const baseUrl = process.env.HERALD_URL ?? "";
const adminKey = process.env.HERALD_ADMIN_KEY ?? "";
// The package: this file runs from dist/test/.
const here = new URL("../../", import.meta.url);

interface Received {
  headers: IncomingHttpHeaders;
  body: Buffer;
}
const received: Received[] = [];
const receiver = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    received.push({ headers: request.headers, body: Buffer.concat(chunks) });
    response.writeHead(204).end();
  });
});
let receiverUrl = "";
let herald: Herald;
let tenantKey = "";

async function until<T>(check: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const found = await check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

before(async () => {
  assert.ok(baseUrl && adminKey, "HERALD_URL and HERALD_ADMIN_KEY name the Herald to test");
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const admin = new Herald({ baseUrl, apiKey: adminKey });
  const tenant = await admin.tenants.create(`typescript-${Date.now()}`);
  tenantKey = tenant.api_key;
  herald = new Herald({ baseUrl, apiKey: tenantKey });
});

after(() => receiver.close());

describe("the client", () => {
  test("speaks every resource typed, and a receiver verifies what Herald sent", async () => {
    const customer = await herald.customers.put("cus_ts", { name: "TypeScript Ltd" });
    assert.equal(customer.id, "cus_ts");
    const endpoint = await herald.endpoints.create({
      url: `${receiverUrl}/hook`,
      customer_id: "cus_ts",
      event_types: ["invoice.*"],
      signature_schemes: ["v1", "v1a"],
      payload_format: "standard",
    });
    assert.match(endpoint.secret, /^whsec_/);
    assert.equal(endpoint.customer_id, "cus_ts");
    const listed = await herald.endpoints.list({ customer_id: "cus_ts" });
    assert.deepEqual(
      listed.items.map((e) => e.id),
      [endpoint.id],
    );
    await herald.eventTypes.create({ name: "invoice.paid", description: "Paid in full." });

    const intent = { event_type: "invoice.paid", payload: { invoice: 7 }, customer_id: "cus_ts" };
    const published = await herald.events.publish(intent, { idempotencyKey: "ts-evt-1" });
    const again = await herald.events.publish(intent, { idempotencyKey: "ts-evt-1" });
    assert.equal(again.id, published.id); // a replay of the same request: the same event
    const [delivery] = published.deliveries;
    assert.ok(delivery);
    await until(async () => {
      const state = (await herald.deliveries.get(delivery.id)).state;
      return state === "succeeded" ? state : undefined;
    }, "the delivery to succeed");
    const attempts = await herald.deliveries.attempts(delivery.id);
    assert.equal(attempts.items[0]?.status_code, 204);

    const sent = received.find((r) => r.headers["webhook-id"] === delivery.id);
    assert.ok(sent, "the receiver got the delivery");
    const body = verify(sent.headers, sent.body, endpoint.secret) as { type: string; data: unknown };
    assert.equal(body.type, "invoice.paid");
    assert.deepEqual(body.data, { invoice: 7 });
    assert.ok(endpoint.public_key);
    assert.ok(verify(sent.headers, sent.body, endpoint.public_key)); // v1a, ed25519
    assert.throws(() => verify(sent.headers, Buffer.concat([sent.body, Buffer.from(" ")]), endpoint.secret), InvalidSignature);
    assert.throws(() => verify(sent.headers, sent.body, `whsec_${"A".repeat(43)}=`), InvalidSignature);
    const later = new Date(Date.now() + 10 * 60 * 1000);
    assert.throws(() => verify(sent.headers, sent.body, endpoint.secret, later), /too old or too new/);
    assert.throws(() => verify({}, sent.body, endpoint.secret), /missing webhook-id/);
  });

  test("an error is a HeraldError carrying Herald's problem, in words", async () => {
    await assert.rejects(herald.deliveries.get("dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV"), (error) => {
      assert.ok(error instanceof HeraldError);
      assert.equal(error.status, 404);
      assert.match(error.problem.detail ?? "", /not found/);
      return true;
    });
    await assert.rejects(
      herald.events.publish({ event_type: "a.b", payload: {}, customer_id: "nobody" }),
      /customer nobody not found/,
    );
  });

  test("a 429 whose Retry-After is longer than maxRetryWait is the answer, asked once", async () => {
    const asked: number[] = [];
    const counting: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      asked.push(answer.status);
      return answer;
    };
    const endpoint = await herald.endpoints.create({ url: `${receiverUrl}/tested` });
    const impatient = new Herald({ baseUrl, apiKey: tenantKey, maxRetryWait: 0.01, fetch: counting });
    let refused: unknown;
    for (let i = 0; i < 15 && refused === undefined; i++) {
      await impatient.endpoints.test(endpoint.id).catch((error: unknown) => (refused = error));
    }
    assert.ok(refused instanceof HeraldError && refused.status === 429, String(refused));
    assert.match(refused.problem.detail ?? "", /a minute per tenant/);
    assert.equal(asked.filter((status) => status === 429).length, 1); // not retried
  });

  test("tries a transformation on an event, saving and sending nothing", async () => {
    const endpoint = await herald.endpoints.create({ url: `${receiverUrl}/chat` });
    const tried = await herald.endpoints.tryTransformation(endpoint.id, {
      transformation: '{"body": {"text": "Order " + payload.id}, "path": "/sales"}',
      event_type: "order.paid",
      payload: { id: "o_7" },
    });
    assert.equal(tried.outcome, "sent");
    assert.deepEqual(tried.request?.body, { text: "Order o_7" });
    assert.equal(tried.request?.url, `${receiverUrl}/chat/sales`);
    assert.equal((await herald.endpoints.get(endpoint.id)).transformation, null);
  });

  test("polls a polling endpoint, verifies what it read and acknowledges it", async () => {
    const endpoint = await herald.endpoints.create({ delivery: "poll", payload_format: "standard" });
    assert.equal(endpoint.url, null);
    const delivery = await herald.deliveries.create({
      endpoint_id: endpoint.id,
      event_type: "report.ready",
      payload: { report: 7 },
    });
    const [read] = await herald.endpoints.poll(endpoint.id, { wait: 5 });
    assert.ok(read);
    assert.equal(read.id, delivery.id);
    const body = verify(read.headers, read.body, endpoint.secret) as { data: unknown };
    assert.deepEqual(body.data, { report: 7 });
    const done = await herald.endpoints.acknowledge(endpoint.id, [read.receipt]);
    assert.deepEqual(done, { acknowledged: [delivery.id], expired: [] });
    assert.equal((await herald.deliveries.get(delivery.id)).state, "succeeded");
  });

  test("mints a portal session whose link opens once", async () => {
    await herald.customers.put("cus_portal");
    const session = await herald.portalSessions.create({ customer_id: "cus_portal", capabilities: ["replay"] });
    const link = session.url.split("#t=")[1];
    assert.ok(link?.startsWith("hpl_"));
    const open = () =>
      fetch(`${baseUrl}/portal/api/session`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ link }),
      });
    assert.equal((await open()).status, 200);
    assert.equal((await open()).status, 401);
    await herald.portalSessions.revoke(session.id);
    const settings = await herald.portalSettings.put({ name: "TS portal", allowed_origins: ["https://app.ts.test"] });
    assert.deepEqual(settings.allowed_origins, ["https://app.ts.test"]);
  });

  test("lists portal sessions and revokes a customer's or a key's", async () => {
    await herald.customers.put("cus_list_a");
    await herald.customers.put("cus_list_b");
    const first = await herald.portalSessions.create({ customer_id: "cus_list_a" });
    const second = await herald.portalSessions.create({ customer_id: "cus_list_a", capabilities: ["replay"] });
    const other = await herald.portalSessions.create({ customer_id: "cus_list_b" });
    const listed = await herald.portalSessions.list({ customer_id: "cus_list_a" });
    assert.deepEqual(
      listed.items.map((s) => [s.id, s.status, s.capabilities]),
      [
        [second.id, "unopened", ["replay"]],
        [first.id, "unopened", []],
      ],
    ); // newest first
    const page = await herald.portalSessions.list({ customer_id: "cus_list_a", limit: 1 });
    assert.deepEqual(
      page.items.map((s) => s.id),
      [second.id],
    );
    assert.ok(page.next_cursor);
    const rest = await herald.portalSessions.list({ customer_id: "cus_list_a", limit: 1, cursor: page.next_cursor });
    assert.deepEqual(
      rest.items.map((s) => s.id),
      [first.id],
    );
    const keyId = listed.items[0]?.api_key_id;
    assert.ok(keyId);
    assert.match(keyId, /^key_/);
    const byKey = await herald.portalSessions.list({ api_key_id: keyId });
    assert.ok([first.id, second.id, other.id].every((id) => byKey.items.some((s) => s.id === id)));

    assert.equal((await herald.portalSessions.revokeAll({ customer_id: "cus_list_a" })).revoked, 2);
    assert.equal((await herald.portalSessions.revokeAll({ customer_id: "cus_list_a" })).revoked, 0);
    const ended = await herald.portalSessions.revokeAll({ customer_id: "cus_list_b", api_key_id: keyId });
    assert.equal(ended.revoked, 1);
    for (const customer_id of ["cus_list_a", "cus_list_b"]) {
      const after = await herald.portalSessions.list({ customer_id });
      assert.ok(after.items.every((s) => s.status === "revoked" && s.revoked_at));
    }
    await assert.rejects(herald.portalSessions.revokeAll({}), (error) => {
      assert.ok(error instanceof HeraldError);
      assert.equal(error.status, 422);
      return true;
    });
  });

  test("reads its limits, and an admin key sets them", async () => {
    const admin = new Herald({ baseUrl, apiKey: adminKey });
    const own = await herald.limits.get();
    assert.match(own.tenant_id, /^ten_/);
    assert.deepEqual(own.set_by_operator, []);
    assert.deepEqual(await admin.tenants.limits(own.tenant_id), own);
    const changed = await admin.tenants.updateLimits(own.tenant_id, { max_endpoints_per_customer: 50, delivery_rate: 0 });
    assert.equal(changed.max_endpoints_per_customer, 50);
    assert.equal(changed.delivery_rate, 0);
    assert.equal(changed.max_endpoints, own.max_endpoints); // not named: unchanged
    assert.deepEqual([...changed.set_by_operator].sort(), ["delivery_rate", "max_endpoints_per_customer"]);
    assert.deepEqual(await herald.limits.get(), changed);
    const back = await admin.tenants.updateLimits(own.tenant_id, { max_endpoints_per_customer: null, delivery_rate: null });
    assert.deepEqual(back, own);
    await assert.rejects(herald.tenants.limits(own.tenant_id), (error) => {
      assert.ok(error instanceof HeraldError);
      assert.equal(error.status, 403); // a tenant key, not an admin's
      return true;
    });
  });

  test("its types are generated from the committed openapi/openapi.json", () => {
    const cli = new URL("node_modules/openapi-typescript/bin/cli.js", here);
    const spec = new URL("../../openapi/openapi.json", here);
    const fresh = execFileSync(process.execPath, [cli.pathname, spec.pathname, "--default-non-nullable", "false"], { encoding: "utf8" });
    const committed = readFileSync(new URL("src/openapi.ts", here), "utf8");
    assert.equal(fresh, committed, "run `npm run generate` in clients/typescript and commit it");
  });
});
