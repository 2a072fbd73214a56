// npm run gen:config: rewrites docs/configuration.md and the README's configuration table from the
// settings tables (services/node/settings.ts). test/unit/config-docs.test.ts fails when they drift.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { configurationDoc, withReadmeTable } from "../services/node/config-docs.ts";

const repo = fileURLToPath(new URL("../", import.meta.url));
writeFileSync(`${repo}docs/configuration.md`, configurationDoc());
const readme = `${repo}README.md`;
writeFileSync(readme, withReadmeTable(readFileSync(readme, "utf8")));
process.stdout.write("wrote docs/configuration.md and the README's configuration table\n");
