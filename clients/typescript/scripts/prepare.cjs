// npm runs this (the package's `prepare`) on `npm install` of this folder, from a project of
// yours or here, and before `npm pack` and `npm publish`: it builds dist/, the ES module build
// and the CommonJS one. A folder installed by its path comes without its devDependencies, so
// the compiler is installed here first when it is missing (npm ci: the lockfile's versions).
const { execFileSync } = require("node:child_process");
const { existsSync } = require("node:fs");
const { join } = require("node:path");

const here = join(__dirname, "..");
// The npm that runs this script, whichever it is (npm_execpath), else the one on PATH.
const npm = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ["npm"];
const run = (...args) =>
  execFileSync(npm[0], [...npm.slice(1), ...args], { cwd: here, stdio: "inherit" });

if (!existsSync(join(here, "node_modules", ".bin", "tsc"))) {
  // --ignore-scripts: this script is not run again from inside its own install.
  run("ci", "--ignore-scripts", "--no-audit", "--no-fund");
}
run("run", "build");
