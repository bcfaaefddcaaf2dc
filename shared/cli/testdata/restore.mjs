// LanceDB restores an earlier version of a dataset (issue 22, Medium 5):
//   node restore.mjs <fixture dir> <dbdir> <table> <version>
// It loads @lancedb/lancedb from the shared/lance fixture's node_modules
// (its lock file) and prints {"latest": N} after the restore commit.
import { createRequire } from "node:module";

const [fixture, dir, name, version] = process.argv.slice(2);
const lancedb = createRequire(fixture + "/")("@lancedb/lancedb");
const db = await lancedb.connect(dir);
const tbl = await db.openTable(name);
await tbl.checkout(Number(version));
await tbl.restore();
console.log(JSON.stringify({ latest: await tbl.version() }));
