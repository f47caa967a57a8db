// The CommonJS build (dist/cjs) sits in a package that is "type": "module": its own
// package.json tells Node, and TypeScript reading its .d.ts files, that these files are CommonJS.
const { writeFileSync } = require("node:fs");
const { join } = require("node:path");

writeFileSync(join(__dirname, "..", "dist", "cjs", "package.json"), '{ "type": "commonjs" }\n');
