// A user's ES module on the installed TypeScript client, compiled and run in a fresh npm
// project by tests/packaging/test_typescript_package.py: accept a delivery, read it until it
// has been delivered, and print what it read as JSON.
import { Herald } from "herald-webhooks-client";

const herald = new Herald({ baseUrl: process.env.HERALD_URL ?? "", apiKey: process.env.HERALD_KEY ?? "" });
const accepted = await herald.deliveries.create({
  endpoint_id: process.env.ENDPOINT_ID ?? "",
  event_type: "package.esm",
  payload: { from: "esm" },
});
let read = await herald.deliveries.get(accepted.id);
for (const deadline = Date.now() + 60_000; read.state !== "succeeded" && Date.now() < deadline; ) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  read = await herald.deliveries.get(accepted.id);
}
// Which of the package's builds Node loaded for an import.
const resolved = import.meta.resolve("herald-webhooks-client");
console.log(JSON.stringify({ accepted: accepted.id, read: read.id, state: read.state, resolved }));
