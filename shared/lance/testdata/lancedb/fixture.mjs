// LanceDB fixture for tablekeep's shared/lance tests. Subcommands print one
// JSON document on stdout:
//   create <dbdir> <table> <commits> [v1]  the seed's churn (see below); prints versions, tags, timestamps
//   dump <dbdir> <table>               checks out EVERY listed version, prints its rows (sorted by id)
//   write <dbdir> <table>              one more upsert on the latest version (it still accepts writes)
//   optimize <dbdir> <table> <cutoffMs> LanceDB's own optimize({cleanupOlderThan}) with that cut-off
//   churn <dbdir> <table> <versions>   single-commit upserts until that many versions (benchmark)
//   compact <dbdir> <table>            optimize with a cut-off at the epoch: compaction, no cleanup
//   timed-cleanup <dbdir> <table> <cutoffMs> optimize after compact: the time of LanceDB's cleanup
//   mixed <dbdir> <table> <rounds>     10 rows, a btree index on id, then one-row upserts, delete+add, deletes, adds (no optimize)
//   verify <dbdir> <table>             the latest version: every id's index query (id = x) and a range query against the scan; fragments
//   timed-compact <dbdir> <table>      optimize() with a cut-off at the epoch (compaction + index update), timed; fragments after
//   openget <dbdir> <table> <id>       connect, open and a get by key (id = arg), timed (best of 5)
//   op <dbdir> <table> add|delete|upsert|restore|optimize <arg>  add row id arg, delete or upsert id arg, restore version arg, LanceDB's optimize()
//   writer <dbdir> <table> <n>         n acknowledged writes (upsert of a new key, delete of an old one), printing what it saw acknowledged
import * as lancedb from "@lancedb/lancedb";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// LANCE_STORAGE_OPTIONS (JSON) is passed to LanceDB: an S3 endpoint and
// credentials, when <dbdir> is an s3:// URI (the benchmark on versitygw).
const envOptions = process.env.LANCE_STORAGE_OPTIONS ? JSON.parse(process.env.LANCE_STORAGE_OPTIONS) : {};
const connect = (dir, extra = {}) => lancedb.connect(dir, { storageOptions: { ...envOptions, ...extra } });

function rows(ids, gen) {
  return ids.map((id) => ({ id, name: `row-${id}-g${gen}`, val: id * 1.5 + gen }));
}

async function create(dir, name, commits, scheme) {
  // scheme "v1": plain {n}.manifest names; default: the inverted 20-digit names
  const db = await connect(dir, { new_table_enable_v2_manifest_paths: scheme === "v1" ? "false" : "true" });
  let nextId = 0;
  const initial = [];
  for (let i = 0; i < 20; i++) initial.push(nextId++);
  const tbl = await db.createTable(name, rows(initial, 0), { mode: "overwrite" });
  const tags = {};
  let gen = 1;
  for (let i = 0; i < commits; i++, gen++) {
    // Distinct manifest timestamps, so a cut-off falls between two versions;
    // wider apart in the last commits, where the tests put their cut-off
    // (LanceDB's optimize turns its cut-off into an age, which moves by the
    // time optimize takes before it cleans).
    await sleep(i >= commits - 12 ? 60 : 3);
    switch (i % 5) {
      case 0: // delete + add (the seed's registry churn): two commits
        await tbl.delete(`id = ${(i * 7) % nextId}`);
        await tbl.add(rows([nextId++], gen));
        break;
      case 1: // mergeInsert upsert: one existing key, one new key
      case 3: {
        const ids = [(i * 3) % nextId, nextId++];
        await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows(ids, gen));
        break;
      }
      case 2: // a deletion only (deletion file)
        await tbl.delete(`id = ${(i * 11) % nextId}`);
        break;
      case 4: // plain append
        await tbl.add(rows([nextId++, nextId++], gen));
        break;
    }
    if (i === 3) {
      await tbl.createIndex("id", { config: lancedb.Index.btree() });
    }
    if (i === Math.floor(commits / 3) || i === Math.floor(commits / 2)) {
      const v = await tbl.version();
      const tagName = `t${v}`;
      await (await tbl.tags()).create(tagName, v);
      tags[tagName] = v;
    }
  }
  if (commits > 8) {
    // re-index (a new index uuid; the old one is only referenced by old versions)
    await tbl.optimize({ cleanupOlderThan: new Date(0) }).catch(() => {});
  }
  const versions = (await tbl.listVersions()).map((v) => ({ version: v.version, ts: v.timestamp.getTime() }));
  return { versions, tags, latest: await tbl.version() };
}

// churn: the seed's pattern, single-commit upserts (mergeInsert of one
// row), until the table has `versions` versions; no sleeps.
async function churn(dir, name, versions) {
  const db = await connect(dir);
  const tbl = await db.createTable(name, rows([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0), { mode: "overwrite" });
  await tbl.createIndex("id", { config: lancedb.Index.btree() });
  let gen = 1;
  const start = Date.now();
  while ((await tbl.version()) < versions) {
    const id = gen % 2 === 0 ? gen % 10 : 10 + gen;
    await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows([id], gen));
    gen++;
  }
  return { latest: await tbl.version(), ms: Date.now() - start };
}

// timed optimize: compaction first (untimed), then the timed call whose
// work is the cleanup with the cut-off.
async function timedCleanup(dir, name, cutoffMs) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  const start = process.hrtime.bigint();
  const stats = await tbl.optimize({ cleanupOlderThan: new Date(Number(cutoffMs)) });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  return { ms, prune: stats.prune, latest: await tbl.version() };
}

async function dump(dir, name) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  const versions = (await tbl.listVersions()).map((v) => v.version);
  const out = {};
  for (const v of versions) {
    await tbl.checkout(v);
    const rs = await tbl.query().toArray();
    out[v] = rs
      .map((r) => ({ id: Number(r.id), name: r.name, val: r.val }))
      .sort((a, b) => a.id - b.id);
    // the scalar index, where present, still answers
    if (v === versions[versions.length - 1]) {
      await tbl.query().where("id = 1").toArray();
    }
  }
  await tbl.checkoutLatest();
  const tags = await (await tbl.tags()).list();
  const tagOut = {};
  for (const [k, c] of Object.entries(tags)) tagOut[k] = Number(c.version);
  for (const t of Object.keys(tagOut)) {
    await tbl.checkout(t);
    await tbl.query().toArray();
  }
  return { versions, rows: out, tags: tagOut };
}

async function write(dir, name) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows([1, 100000], 999));
  await tbl.delete("id = 2");
  return { latest: await tbl.version(), rows: await tbl.countRows() };
}

async function optimize(dir, name, cutoffMs) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  // Compact first (its cleanup, with a cut-off at the epoch, deletes
  // nothing), so that the second call's cleanup starts at once.
  await tbl.optimize({ cleanupOlderThan: new Date(0) });
  const stats = await tbl.optimize({ cleanupOlderThan: new Date(Number(cutoffMs)) });
  return { prune: stats.prune, compaction: stats.compaction, latest: await tbl.version() };
}

async function mixed(dir, name, rounds) {
  // LANCE_FILE_VERSION (e.g. 2.0, 2.2): the new table's data storage version
  // LANCE_MANIFEST_NAMES=v1: plain {n}.manifest names
  const v = process.env.LANCE_FILE_VERSION;
  const opts = v ? { new_table_data_storage_version: v } : {};
  if (process.env.LANCE_MANIFEST_NAMES === "v1") opts.new_table_enable_v2_manifest_paths = "false";
  const db = await connect(dir, opts);
  const tbl = await db.createTable(name, rows([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0), { mode: "overwrite" });
  await tbl.createIndex("id", { config: lancedb.Index.btree() });
  let nextId = 10;
  for (let i = 0, gen = 1; i < rounds; i++, gen++) {
    switch (i % 4) {
      case 0: // mergeInsert upsert: an existing key and a new one
        await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows([(i * 3) % nextId, nextId++], gen));
        break;
      case 1: // delete + add
        await tbl.delete(`id = ${(i * 7) % nextId}`);
        await tbl.add(rows([nextId++], gen));
        break;
      case 2: // a deletion only
        await tbl.delete(`id = ${(i * 11) % nextId}`);
        break;
      case 3: // plain one-row append
        await tbl.add(rows([nextId++], gen));
        break;
    }
  }
  return { latest: await tbl.version() };
}

async function verify(dir, name) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  const norm = (rs) => rs.map((r) => ({ id: Number(r.id), name: r.name, val: r.val })).sort((a, b) => a.id - b.id);
  const all = norm(await tbl.query().toArray());
  const bad = [];
  for (const r of all) {
    const got = norm(await tbl.query().where(`id = ${r.id}`).toArray());
    if (got.length !== 1 || got[0].name !== r.name || got[0].val !== r.val) bad.push({ id: r.id, got });
  }
  const want = all.filter((r) => r.id >= 5 && r.id < 30);
  const range = norm(await tbl.query().where("id >= 5 AND id < 30").toArray());
  if (JSON.stringify(range) !== JSON.stringify(want)) bad.push({ range: range.length, want: want.length });
  const missing = norm(await tbl.query().where("id = 99999999").toArray());
  if (missing.length !== 0) bad.push({ missing });
  const stats = await tbl.stats();
  const idx = await tbl.listIndices();
  return { rows: all.length, bad, fragments: stats.fragmentStats.numFragments, indices: idx.map((i) => i.name), version: await tbl.version() };
}

// writer: n acknowledged writes against whatever else commits; prints the
// keys it saw upserted and deleted (acknowledged only).
async function writer(dir, name, n) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  const upserted = [], deleted = [];
  for (let i = 0; i < n; i++) {
    const id = 1000000 + i;
    try {
      await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows([id], 7));
      upserted.push(id);
    } catch (e) { /* not acknowledged */ }
    if (i % 3 === 2) {
      const victim = 1000000 + i - 2;
      try {
        await tbl.delete(`id = ${victim}`);
        deleted.push(victim);
      } catch (e) { /* not acknowledged */ }
    }
  }
  return { upserted, deleted };
}

async function op(dir, name, kind, arg) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  switch (kind) {
    case "add": await tbl.add(rows([Number(arg)], 5)); break;
    case "delete": await tbl.delete(`id = ${Number(arg)}`); break;
    case "upsert": await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows([Number(arg)], 55)); break;
    case "restore": await tbl.checkout(Number(arg)); await tbl.restore(); break;
    case "optimize": await tbl.optimize({ cleanupOlderThan: new Date(0) }); break;
  }
  return { latest: await tbl.version() };
}

async function timedCompact(dir, name) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  const start = process.hrtime.bigint();
  const stats = await tbl.optimize({ cleanupOlderThan: new Date(0) });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  return { ms, compaction: stats.compaction, fragments: (await tbl.stats()).fragmentStats.numFragments, latest: await tbl.version() };
}

async function openGet(dir, name, id) {
  let best = Infinity, rows = 0;
  for (let i = 0; i < 5; i++) {
    const start = process.hrtime.bigint();
    const db = await connect(dir);
    const tbl = await db.openTable(name);
    rows = (await tbl.query().where(`id = ${Number(id)}`).toArray()).length;
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e6);
  }
  return { ms: best, rows };
}

const [cmd, dir, name, arg, arg2] = process.argv.slice(2);
let res;
switch (cmd) {
  case "create": res = await create(dir, name, Number(arg), arg2); break;
  case "dump": res = await dump(dir, name); break;
  case "write": res = await write(dir, name); break;
  case "optimize": res = await optimize(dir, name, arg); break;
  case "churn": res = await churn(dir, name, Number(arg)); break;
  case "compact": res = await optimize(dir, name, 0); break;
  case "timed-cleanup": res = await timedCleanup(dir, name, arg); break;
  case "mixed": res = await mixed(dir, name, Number(arg)); break;
  case "verify": res = await verify(dir, name); break;
  case "timed-compact": res = await timedCompact(dir, name); break;
  case "openget": res = await openGet(dir, name, arg); break;
  case "op": res = await op(dir, name, arg, arg2); break;
  case "writer": res = await writer(dir, name, Number(arg)); break;
  default:
    console.error(`usage: node fixture.mjs create|dump|write|optimize <dbdir> <table> [arg]`);
    process.exit(2);
}
process.stdout.write(JSON.stringify(res) + "\n");
