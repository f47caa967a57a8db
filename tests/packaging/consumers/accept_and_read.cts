// A user's CommonJS module on the installed TypeScript client (require(), as Node 20 cannot
// require an ES module), compiled and run in a fresh npm project by
// tests/packaging/test_typescript_package.py: accept a delivery, read it until it has been
// delivered, and print what it read as JSON.
import herald_webhooks = require("herald-webhooks-client");

async function main(): Promise<void> {
  const herald = new herald_webhooks.Herald({
    baseUrl: process.env.HERALD_URL ?? "",
    apiKey: process.env.HERALD_KEY ?? "",
  });
  const accepted = await herald.deliveries.create({
    endpoint_id: process.env.ENDPOINT_ID ?? "",
    event_type: "package.cjs",
    payload: { from: "cjs" },
  });
  let read = await herald.deliveries.get(accepted.id);
  for (const deadline = Date.now() + 60_000; read.state !== "succeeded" && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    read = await herald.deliveries.get(accepted.id);
  }
  // Which of the package's builds Node loaded for a require().
  const resolved = require.resolve("herald-webhooks-client");
  console.log(JSON.stringify({ accepted: accepted.id, read: read.id, state: read.state, resolved }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
