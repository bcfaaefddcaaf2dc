// LanceDB fixture for tablekeep's shared/lance tests. Subcommands print one
// JSON document on stdout:
//   create <dbdir> <table> <commits> [v1]  the seed's churn (see below); prints versions, tags, timestamps
//   dump <dbdir> <table>               checks out EVERY listed version, prints its rows (sorted by id)
//   write <dbdir> <table>              one more upsert on the latest version (it still accepts writes)
//   append <dbdir> <table> <n>         n one-row adds of new ids (1000000 and up) to the existing table
//   optimize <dbdir> <table> <cutoffMs> LanceDB's own optimize({cleanupOlderThan}) with that cut-off
//   churn <dbdir> <table> <versions>   single-commit upserts until that many versions (benchmark)
//   upserts <dbdir> <table> <n> <bulk> <bulk> rows, a btree index, a tag, n single-commit upserts, a tag (benchmark)
//   compact <dbdir> <table>            optimize with a cut-off at the epoch: compaction, no cleanup
//   timed-cleanup <dbdir> <table> <cutoffMs> optimize after compact: the time of LanceDB's cleanup
//   pages <dbdir> <table> <schema> <adds> <rowsPerAdd> [same]  a table of <adds> adds of <rowsPerAdd> rows
//                                      each, schema "fixture" (id, name, val as create writes them) or "wide"
//                                      (every type shared/lance/lanceenc decodes, with nulls); no index; "same":
//                                      every add of generation 0, so N adds of 1 row hold what 1 add of N does
//   rows <dbdir> <table>               every row of the latest version with its _rowid (BigInts as strings)
//   take <dbdir> <table> <o1,o2,...>   the rows at those offsets (random access), as rows prints them
//   addopt <dbdir> <table> <rows>      add that many "wide" rows (ids after the last), then LanceDB's own
//                                      optimize (compaction reads every page of every fragment)
//   restore <dbdir> <table> <version>  checkout(version).restore(): a new latest version with that version's data
//   mixed <dbdir> <table> <rounds>     10 rows, a btree index on id, then one-row upserts, delete+add, deletes, adds (no optimize)
//   verify <dbdir> <table>             the latest version: every id's index query (id = x) and a range query against the scan; fragments
//   timed-compact <dbdir> <table>      optimize() with a cut-off at the epoch (compaction + index update), timed; fragments after
//   openget <dbdir> <table> <id>       connect, open and a get by key (id = arg), timed (best of 5)
//   op <dbdir> <table> add|delete|upsert|restore|optimize|overwrite <arg>  add row id arg, delete id arg (or where arg), upsert id arg, restore version arg, LanceDB's optimize(), overwrite the table with row id arg
//   deletes <dbdir> <table> <adds> <rowsPerAdd>  10 rows, a btree index on id, then <adds> adds of <rowsPerAdd>
//                                      rows, then two deletes (ids >= 10 with id % 4 = 1, then = 2): half of each added fragment deleted
//   writer <dbdir> <table> <n>         n acknowledged writes (upsert of a new key, delete of an old one), printing what it saw acknowledged
//   vector <dbdir> <table> <rows> <adds>  <rows> rows (id, vec FixedSizeList<Float32>[8]), an IVF_PQ index on vec, then <adds> one-row adds
//   bigdel <dbdir> <table>             4 adds of 100 rows (ids 0..399, no index), deletes of 11, 90 and 10 of the
//                                      first three fragments' rows, then 2 one-row adds (ids 400, 401)
//   vverify <dbdir> <table> <k>        every row's vector search (all partitions, exact re-rank) against a brute-force top-k over the scan
//   matrix <dbdir>                     one table per Arrow type x storage version 2.0/2.1/2.2 (named <type>_<20|21|22>: id Int64 and
//                                      v of the type, nulls among them), each 3 rows, 4 adds of 2 rows, a delete of id 4; prints the names
//   readall <dbdir> <t1,t2,...>        every listed version of each table, its rows sorted by id (id, v's validity as ok, v as JSON:
//                                      BigInts as strings, bytes as base64, dates as ms), or the error LanceDB gives reading it
import * as lancedb from "@lancedb/lancedb";
import * as arrow from "apache-arrow";
import { createRequire } from "node:module";

// LanceDB loads apache-arrow's CommonJS build: arrow tables of the matrix
// are built with that one (the ESM build's classes fail its instanceof).
const arrowCJS = createRequire(import.meta.url)("apache-arrow");

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

// upserts: the compaction benchmark's dataset, the seed's churn on a
// table of <bulk> rows: one write of ids 0..bulk-1, a btree index on id, a
// tag, then <n> single-commit upserts (mergeInsert of one row; even ones
// update one of the ten keys 0..9, odd ones add a key after the bulk rows)
// and a second tag halfway; no sleeps. Prints the latest version, the
// upserts' time and the row count.
async function upserts(dir, name, n, bulk) {
  const db = await connect(dir);
  const ids = Array.from({ length: bulk }, (_, k) => k);
  const tbl = await db.createTable(name, rows(ids, 0), { mode: "overwrite" });
  await tbl.createIndex("id", { config: lancedb.Index.btree() });
  const tags = await tbl.tags();
  await tags.create("indexed", await tbl.version());
  const start = Date.now();
  for (let i = 0, gen = 1; i < n; i++, gen++) {
    const id = gen % 2 === 0 ? gen % 10 : bulk + gen;
    await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows([id], gen));
    if (i === Math.floor(n / 2)) await tags.create("half", await tbl.version());
  }
  return { latest: await tbl.version(), ms: Date.now() - start, rows: await tbl.countRows() };
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

// The "wide" schema: every type the page codec handles, nulls where the
// column is nullable, an all-null column, a mostly-null one and strings of
// 300+ bytes (full-zip).
const wideSchema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("name", new arrow.Utf8(), true),
  new arrow.Field("val", new arrow.Float64(), true),
  new arrow.Field("n32", new arrow.Int32(), true),
  new arrow.Field("flag", new arrow.Bool(), true),
  new arrow.Field("ts", new arrow.TimestampMicrosecond(), true),
  new arrow.Field("opt", new arrow.Float64(), true),
  new arrow.Field("note", new arrow.Utf8(), true),
  new arrow.Field("long", new arrow.Utf8(), true),
  new arrow.Field("gone", new arrow.Float64(), true),
  new arrow.Field("bin", new arrow.Binary(), true),
  new arrow.Field("sparse", new arrow.Utf8(), true),
]);

function wideRows(ids, gen) {
  return ids.map((i) => ({
    id: BigInt(i),
    name: `row-${i}-g${gen}`,
    val: i * 1.5 + gen,
    n32: i * 7 - 100,
    flag: i % 3 === 0,
    ts: 1700000000000 + i * 1003, // milliseconds (apache-arrow scales to microseconds)
    opt: i % 4 === 1 ? null : i / 4,
    note: i % 5 === 2 ? null : `n${i}`.repeat(1 + (i % 7)),
    long: i % 6 === 3 ? null : `L${i}:` + "x".repeat(300 + (i % 50)),
    gone: null,
    bin: i % 8 === 5 ? null : Uint8Array.from({ length: i % 9 }, (_, k) => (i * 31 + k) & 255),
    sparse: i % 500 === 0 ? `s${i}` : null, // long null runs: all-null pages among valued ones
  }));
}

// The "const" schema: columns that are constant (with nulls) in a page,
// which Lance 2.2 writes as ConstantLayout pages.
const constSchema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("c", new arrow.Float64(), true),
  new arrow.Field("s", new arrow.Utf8(), true),
  new arrow.Field("b", new arrow.Bool(), true),
  new arrow.Field("i8", new arrow.Int8(), true),
]);

function constRows(ids) {
  return ids.map((i) => ({ id: BigInt(i), c: i % 3 === 0 ? null : 7.5, s: i % 3 === 0 ? null : "k", b: true, i8: 1 }));
}

async function pages(dir, name, schema, adds, perAdd, same) {
  // LANCE_FILE_VERSION (e.g. "2.0"): the new table's data storage version
  const version = process.env.LANCE_FILE_VERSION;
  const db = await connect(dir, version ? { new_table_data_storage_version: version } : {});
  let next = 0;
  const batch = (gen) => {
    const ids = [];
    for (let k = 0; k < perAdd; k++) ids.push(next++);
    if (schema === "const") return lancedb.makeArrowTable(constRows(ids), { schema: constSchema });
    return schema === "wide" ? lancedb.makeArrowTable(wideRows(ids, gen), { schema: wideSchema }) : rows(ids, gen);
  };
  const tbl = await db.createTable(name, batch(0), { mode: "overwrite" });
  for (let g = 1; g < adds; g++) await tbl.add(batch(same ? 0 : g));
  return { latest: await tbl.version(), rows: await tbl.countRows() };
}

const jsonValue = (v) => {
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  return v;
};

async function allRows(dir, name) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  return arrowRows(await tbl.query().withRowId().toArrow());
}

// take: the rows at the given offsets (LanceDB's random access path, which
// reads single mini-block chunks and full-zip repetition indices).
async function take(dir, name, list) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  return arrowRows(await tbl.takeOffsets(list.split(",").map(Number)).withRowId().toArrow());
}

async function addOptimize(dir, name, n) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  const start = await tbl.countRows();
  const ids = [];
  for (let k = 0; k < n; k++) ids.push(start + k);
  await tbl.add(lancedb.makeArrowTable(wideRows(ids, 0), { schema: wideSchema }));
  const stats = await tbl.optimize({ cleanupOlderThan: new Date(0) });
  return { rows: await tbl.countRows(), compaction: stats.compaction };
}

function arrowRows(t) {
  const fields = t.schema.fields.map((f) => f.name);
  const out = [];
  for (let r = 0; r < t.numRows; r++) {
    const row = {};
    for (const f of fields) row[f] = jsonValue(t.getChild(f).get(r));
    out.push(row);
  }
  const types = {};
  for (const f of t.schema.fields) types[f.name] = String(f.type);
  return { types, rows: out };
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

async function append(dir, name, n) {
  // n one-row adds of new ids (1000000 and up) to the existing table: a fragment each
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  for (let i = 0; i < n; i++) await tbl.add(rows([1000000 + i], 500));
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

async function restore(dir, name, v) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  await tbl.checkout(Number(v));
  await tbl.restore();
  return { latest: await tbl.version(), rows: await tbl.countRows() };
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

async function deletes(dir, name, adds, per) {
  // LANCE_FILE_VERSION (e.g. 2.0, 2.2): the new table's data storage version
  const v = process.env.LANCE_FILE_VERSION;
  const db = await connect(dir, v ? { new_table_data_storage_version: v } : {});
  const tbl = await db.createTable(name, rows([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0), { mode: "overwrite" });
  await tbl.createIndex("id", { config: lancedb.Index.btree() });
  let nextId = 10;
  for (let i = 0; i < adds; i++) {
    const ids = [];
    for (let j = 0; j < per; j++) ids.push(nextId++);
    await tbl.add(rows(ids, i + 1));
  }
  await tbl.delete("id >= 10 AND id % 4 = 1");
  await tbl.delete("id >= 10 AND id % 4 = 2");
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
    case "delete": await tbl.delete(/^[0-9]+$/.test(arg) ? `id = ${Number(arg)}` : arg); break; // an id, or a predicate
    case "upsert": await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows([Number(arg)], 55)); break;
    case "restore": await tbl.checkout(Number(arg)); await tbl.restore(); break;
    case "optimize": await tbl.optimize({ cleanupOlderThan: new Date(0) }); break;
    case "overwrite": await tbl.add(rows([Number(arg)], 9), { mode: "overwrite" }); break; // the table becomes that one row
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

// bigdel: fragments of 100 rows with deleted shares 0.11, 0.9, 0.1 and 0,
// then two one-row fragments (Lance's per-fragment compaction candidacy).
async function bigdel(dir, name) {
  const db = await connect(dir);
  const ids = (lo, n) => Array.from({ length: n }, (_, k) => lo + k);
  const tbl = await db.createTable(name, rows(ids(0, 100), 0), { mode: "overwrite" });
  for (let g = 1; g < 4; g++) await tbl.add(rows(ids(100 * g, 100), g));
  await tbl.delete("id >= 0 AND id < 11");
  await tbl.delete("id >= 100 AND id < 190");
  await tbl.delete("id >= 200 AND id < 210");
  await tbl.add(rows([400], 4));
  await tbl.add(rows([401], 5));
  return { latest: await tbl.version(), rows: await tbl.countRows() };
}

// The "vector" schema: an id and an 8-dimensional float vector, distinct
// for every id (deterministic).
const vecDim = 8;
const vecSchema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("vec", new arrow.FixedSizeList(vecDim, new arrow.Field("item", new arrow.Float32(), true)), true),
]);
const vecOf = (id) => Array.from({ length: vecDim }, (_, j) => Math.fround(Math.sin(id * 12.9898 + j * 78.233) * 10));
const vecRows = (ids) => lancedb.makeArrowTable(ids.map((id) => ({ id: BigInt(id), vec: vecOf(id) })), { schema: vecSchema });

async function vector(dir, name, n, adds) {
  const db = await connect(dir);
  const ids = [];
  for (let i = 0; i < n; i++) ids.push(i);
  const tbl = await db.createTable(name, vecRows(ids), { mode: "overwrite" });
  await tbl.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2 }) });
  for (let i = 0; i < adds; i++) await tbl.add(vecRows([n + i]));
  const idx = await tbl.listIndices();
  return { latest: await tbl.version(), rows: await tbl.countRows(), indices: idx.map((i) => `${i.name}:${i.indexType}`) };
}

// vecdel: adds of n rows each with the vector column (no index), then
// every tenth row deleted (id % 10 = 0): a FixedSizeList column's deleted
// rows, which lanceenc cannot filter out.
async function vecdel(dir, name, n, adds) {
  const db = await connect(dir);
  let tbl;
  for (let a = 0; a < adds; a++) {
    const ids = [];
    for (let i = 0; i < n; i++) ids.push(a * n + i);
    if (a === 0) tbl = await db.createTable(name, vecRows(ids), { mode: "overwrite" });
    else await tbl.add(vecRows(ids));
  }
  await tbl.delete("id % 10 = 0");
  return { latest: await tbl.version(), rows: await tbl.countRows() };
}

// vverify: for every row, a vector search for its own vector (every
// partition probed, candidates re-ranked on the stored vectors) must return
// that row first and the same top-k ids as a brute force over the full scan;
// every id it returns must be a row of the scan.
async function vverify(dir, name, k) {
  const db = await connect(dir);
  const tbl = await db.openTable(name);
  const t = await tbl.query().select(["id", "vec"]).toArrow();
  const all = [];
  for (let r = 0; r < t.numRows; r++) all.push({ id: Number(t.getChild("id").get(r)), vec: Array.from(t.getChild("vec").get(r).toArray()) });
  const ids = new Set(all.map((r) => r.id));
  const d2 = (a, b) => a.reduce((s, x, j) => s + (x - b[j]) * (x - b[j]), 0);
  const bad = [];
  for (const q of all) {
    const want = all.map((r) => ({ id: r.id, d: d2(q.vec, r.vec) })).sort((a, b) => a.d - b.d || a.id - b.id).slice(0, k).map((r) => r.id);
    const got = (await tbl.search(q.vec).column("vec").nprobes(2).refineFactor(all.length).limit(k).toArray()).map((r) => Number(r.id));
    if (got[0] !== q.id || JSON.stringify(got) !== JSON.stringify(want) || got.some((id) => !ids.has(id))) bad.push({ id: q.id, got, want });
  }
  const stats = await tbl.stats();
  const idx = await tbl.listIndices();
  const istats = idx.length ? await tbl.indexStats(idx[0].name) : null;
  return {
    rows: all.length, bad: bad.slice(0, 5), nbad: bad.length, fragments: stats.fragmentStats.numFragments,
    indices: idx.map((i) => `${i.name}:${i.indexType}`), indexed: istats ? istats.numIndexedRows : 0,
    unindexed: istats ? istats.numUnindexedRows : 0, version: await tbl.version(),
  };
}

// The type matrix: every Arrow type LanceDB stores, one column "v" each.
// val(i) is row i's value (null where the type's rows have nulls).
const A = arrowCJS;
const I32 = () => new A.Int32();
const item = (t) => new A.Field("item", t, true);
const abc = () => [new A.Field("a", I32(), true), new A.Field("b", new A.Utf8(), true)];
const nul = (i, v) => (i % 3 === 1 ? null : v);
const bytes = (i, n) => Uint8Array.from({ length: n }, (_, k) => (i * 31 + k) & 255);
const matrixTypes = {
  i8: [() => new A.Int8(), (i) => nul(i, i - 5)],
  i16: [() => new A.Int16(), (i) => nul(i, i * 300 - 1000)],
  i32: [I32, (i) => nul(i, i * 70000 - 3)],
  i64: [() => new A.Int64(), (i) => nul(i, BigInt(i) * 10000000000n - 7n)],
  u8: [() => new A.Uint8(), (i) => nul(i, 250 - i)],
  u16: [() => new A.Uint16(), (i) => nul(i, 65000 - i)],
  u32: [() => new A.Uint32(), (i) => nul(i, 4000000000 - i)],
  u64: [() => new A.Uint64(), (i) => nul(i, 18000000000000000000n - BigInt(i))],
  f32: [() => new A.Float32(), (i) => nul(i, i * 0.5 - 1)],
  f64: [() => new A.Float64(), (i) => nul(i, i * 1.25 + 0.1)],
  bool: [() => new A.Bool(), (i) => nul(i, i % 2 === 0)],
  date: [() => new A.DateDay(), (i) => nul(i, new Date(Date.UTC(2020, 0, 1 + i)))],
  ts: [() => new A.TimestampMicrosecond(), (i) => nul(i, 1700000000000 + i * 1003)],
  utf8: [() => new A.Utf8(), (i) => nul(i, `s${i}`.repeat(1 + (i % 4)))],
  longutf8: [() => new A.Utf8(), (i) => nul(i, `L${i}:` + "x".repeat(300 + i))],
  bin: [() => new A.Binary(), (i) => nul(i, bytes(i, i % 5))],
  fsb: [() => new A.FixedSizeBinary(4), (i) => nul(i, bytes(i, 4))],
  vec: [() => new A.FixedSizeList(4, item(new A.Float32())), (i) => [i, i + 0.5, -i, 2]], // no null rows: apache-arrow 18 builds them short
  list: [() => new A.List(item(I32())), (i) => nul(i, Array.from({ length: i % 4 }, (_, k) => i * 10 + k))],
  liststruct: [() => new A.List(item(new A.Struct(abc()))), (i) => nul(i, Array.from({ length: 1 + (i % 3) }, (_, k) => ({ a: i + k, b: `e${i}.${k}` })))],
  listlist: [() => new A.List(item(new A.List(item(I32())))), (i) => nul(i, [[i], [], [i, i + 1]].slice(0, 1 + (i % 3)))],
  list1: [() => new A.List(item(I32())), (i) => [i * 3]], // one item a row: as many items as rows
  liststruct1: [() => new A.List(item(new A.Struct(abc()))), (i) => [{ a: i, b: `o${i}` }]],
  struct: [() => new A.Struct(abc()), (i) => nul(i, { a: i, b: `b${i}` })],
  structlist: [() => new A.Struct([new A.Field("l", new A.List(item(I32())), true), new A.Field("n", I32(), true)]), (i) => ({ l: nul(i, Array.from({ length: i % 3 }, (_, k) => k - i)), n: i })],
  dict: [() => new A.Dictionary(new A.Utf8(), new A.Int32()), (i) => nul(i, ["red", "green", "blue"][i % 3])],
  allnull: [() => new A.Utf8(), () => null],
  allnullf: [() => new A.Float64(), () => null],
  empty: [() => new A.Utf8(), () => ""],
  emptylist: [() => new A.List(item(I32())), () => []],
};
const matrixVersions = { 20: "2.0", 21: "2.1", 22: "2.2" };

async function matrix(dir) {
  const names = [];
  for (const [vk, version] of Object.entries(matrixVersions)) {
    const db = await connect(dir, { new_table_data_storage_version: version });
    for (const [tk, [type, val]] of Object.entries(matrixTypes)) {
      const schema = new A.Schema([new A.Field("id", new A.Int64(), false), new A.Field("v", type(), true)]);
      // apache-arrow's builders (makeArrowTable cannot build a struct of lists)
      const batch = (ids) => {
        const cols = [A.vectorFromArray(ids.map(BigInt), schema.fields[0].type), A.vectorFromArray(ids.map(val), schema.fields[1].type)];
        const data = A.makeData({ type: new A.Struct(schema.fields), length: ids.length, nullCount: 0, children: cols.map((c) => c.data[0]) });
        return new A.Table(schema, new A.RecordBatch(schema, data));
      };
      const name = `${tk}_${vk}`;
      const tbl = await db.createTable(name, batch([0, 1, 2]), { mode: "overwrite" });
      for (let a = 0; a < 4; a++) await tbl.add(batch([3 + 2 * a, 4 + 2 * a]));
      await tbl.delete("id = 4");
      names.push(name);
    }
  }
  return { names };
}

// norm is a value as JSON: nested lists and structs as arrays and objects.
function norm(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  if (v instanceof Date) return v.getTime();
  if (ArrayBuffer.isView(v)) return Array.from(v, norm);
  if (Array.isArray(v)) return v.map(norm);
  if (typeof v === "object") {
    if (typeof v.toArray === "function" && v.type !== undefined) return Array.from(v, norm); // an arrow Vector
    const o = {};
    for (const [k, x] of Object.entries(typeof v.toJSON === "function" ? v.toJSON() : v)) o[k] = norm(x);
    return o;
  }
  return v;
}

async function readAll(dir, list) {
  const db = await connect(dir);
  const out = {};
  for (const name of list.split(",")) {
    const res = {};
    try {
      const tbl = await db.openTable(name);
      for (const v of (await tbl.listVersions()).map((x) => x.version)) {
        try {
          await tbl.checkout(v);
          const t = await tbl.query().toArrow();
          const rs = [];
          for (let r = 0; r < t.numRows; r++) rs.push({ id: norm(t.getChild("id").get(r)), ok: t.getChild("v").isValid(r), v: norm(t.getChild("v").get(r)) });
          rs.sort((a, b) => Number(a.id) - Number(b.id));
          res[v] = rs;
        } catch (e) {
          res[v] = "error: " + String(e && e.message ? e.message : e);
        }
      }
    } catch (e) {
      res.open = "error: " + String(e && e.message ? e.message : e);
    }
    out[name] = res;
  }
  return out;
}

const [cmd, dir, name, arg, arg2] = process.argv.slice(2);
let res;
switch (cmd) {
  case "create": res = await create(dir, name, Number(arg), arg2); break;
  case "dump": res = await dump(dir, name); break;
  case "write": res = await write(dir, name); break;
  case "append": res = await append(dir, name, Number(arg)); break;
  case "optimize": res = await optimize(dir, name, arg); break;
  case "churn": res = await churn(dir, name, Number(arg)); break;
  case "upserts": res = await upserts(dir, name, Number(arg), Number(arg2)); break;
  case "compact": res = await optimize(dir, name, 0); break;
  case "timed-cleanup": res = await timedCleanup(dir, name, arg); break;
  case "pages": res = await pages(dir, name, arg, Number(arg2), Number(process.argv[7]), process.argv[8] === "same"); break;
  case "rows": res = await allRows(dir, name); break;
  case "take": res = await take(dir, name, arg); break;
  case "addopt": res = await addOptimize(dir, name, Number(arg)); break;
  case "restore": res = await restore(dir, name, arg); break;
  case "mixed": res = await mixed(dir, name, Number(arg)); break;
  case "verify": res = await verify(dir, name); break;
  case "deletes": res = await deletes(dir, name, Number(arg), Number(arg2)); break;
  case "timed-compact": res = await timedCompact(dir, name); break;
  case "openget": res = await openGet(dir, name, arg); break;
  case "op": res = await op(dir, name, arg, arg2); break;
  case "writer": res = await writer(dir, name, Number(arg)); break;
  case "vector": res = await vector(dir, name, Number(arg), Number(arg2)); break;
  case "bigdel": res = await bigdel(dir, name); break;
  case "vecdel": res = await vecdel(dir, name, Number(arg), Number(arg2)); break;
  case "vverify": res = await vverify(dir, name, Number(arg)); break;
  case "matrix": res = await matrix(dir); break;
  case "readall": res = await readAll(dir, name); break;
  default:
    console.error(`usage: node fixture.mjs create|dump|write|optimize <dbdir> <table> [arg]`);
    process.exit(2);
}
process.stdout.write(JSON.stringify(res) + "\n");
