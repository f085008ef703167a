// Reads a Criteo-format TSV with DuckDB (npm @duckdb/node-api), for
// package feed's tests and bench/feed: node duckdb.cjs file.tsv threads [count]
// prints the rows as JSON ([label, I1..I13 (null when empty), C1..C26 as
// decimal strings of their 64 bits (null when empty)]), or with "count"
// only the number of rows and the time DuckDB took to read and convert
// them, in milliseconds; with "parquet out.parquet codec rows" it writes
// the rows to a Parquet file (the hexadecimal columns as BIGINT, and a
// list column "bag" of C1..C3 without their nulls with a list "bagw" of
// weights), codec compressed, rows a row group, and prints the file's
// rows as DuckDB reads them back; with "topq out.parquet codec rows" it
// writes the typed columns alone and prints nothing; "pqcount" times
// reading a Parquet file (the first argument) as "count" times the TSV.
const { DuckDBInstance } = require('@duckdb/node-api');

async function main() {

const [file, threads, mode] = process.argv.slice(2);
const db = await DuckDBInstance.create(':memory:', { threads: threads || '1' });
const c = await db.connect();
const cols = ["'label': 'INTEGER'"];
for (let i = 1; i <= 13; i++) cols.push(`'I${i}': 'BIGINT'`);
for (let i = 1; i <= 26; i++) cols.push(`'C${i}': 'VARCHAR'`);
const sel = ['label'];
for (let i = 1; i <= 13; i++) sel.push(`I${i}`);
for (let i = 1; i <= 26; i++) sel.push(`('0x' || C${i})::UBIGINT AS C${i}`);
const src = `read_csv('${file}', delim='\t', header=false, auto_detect=false, quote='', escape='', columns={${cols.join(', ')}})`;
if (mode === 'count') {
  // The rows materialised with their types, the hex columns converted:
  // every field parsed, nothing else computed.
  const t0 = performance.now();
  await c.run(`create table t as select ${sel.join(', ')} from ${src}`);
  const ms = performance.now() - t0;
  const r = await c.runAndReadAll('select count(*) from t');
  console.log(JSON.stringify({ rows: Number(r.getRows()[0][0]), ms }));
} else if (mode === 'pqcount') {
  const t0 = performance.now();
  await c.run(`create table t as select * from read_parquet('${file}')`);
  const ms = performance.now() - t0;
  const r = await c.runAndReadAll('select count(*) from t');
  console.log(JSON.stringify({ rows: Number(r.getRows()[0][0]), ms }));
} else if (mode === 'topq') {
  const [out, codec, rows] = process.argv.slice(5);
  const typed = sel.map((x) => x.replace('::UBIGINT', '::UBIGINT::BIGINT'));
  await c.run(`copy (select ${typed.join(', ')} from ${src}) to '${out}' (format parquet, compression ${codec}, row_group_size ${rows})`);
} else if (mode === 'parquet') {
  const [out, codec, rows] = process.argv.slice(5);
  const typed = sel.map((x) => x.replace('::UBIGINT', '::UBIGINT::BIGINT'));
  await c.run(`copy (select *, list_filter([C1, C2, C3], x -> x is not null) as bag from (select ${typed.join(', ')} from ${src})) to '${out}' (format parquet, compression ${codec}, row_group_size ${rows})`);
  await c.run(`copy (select *, list_transform(bag, x -> (x % 7)::DOUBLE / 2) as bagw from read_parquet('${out}')) to '${out}.tmp' (format parquet, compression ${codec}, row_group_size ${rows})`);
  const fs = require('fs');
  fs.renameSync(`${out}.tmp`, out);
  const r = await c.runAndReadAll(`select * from read_parquet('${out}')`);
  const json = r.getRows().map((row) => row.map((v) => (v === null ? null : (typeof v === 'object' && v.items ? v.items.map((x) => (x === null ? null : x.toString())) : v.toString()))));
  console.log(JSON.stringify(json));
} else {
  const r = await c.runAndReadAll(`select ${sel.join(', ')} from ${src}`);
  const rows = r.getRows().map((row) => row.map((v) => (v === null ? null : v.toString())));
  console.log(JSON.stringify(rows));
}
}

main().catch((e) => { console.error(e.message); process.exit(1); });
