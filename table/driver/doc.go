// Package driver is the vocabulary the packages that hold, step, save
// and serve a table's rows share: interfaces and value types only, as
// database/sql/driver is for database/sql. The types that do the work
// live elsewhere: table's Cached, MemoryStore, File and IDMap, cluster's
// Store and IDMap, optim's rules, checkpoint's files, serve's tables.
//
// What a table is: its Schema (a name, rows, Dim values a row stored in
// a Format, the Columns of optimiser state beside them) and, in a file,
// its layout (LayoutKey, ParseLayout). A new table's rows start as its
// Options say (table.WithState, table.WithSeed, ...). Bags of rows pool
// by a BagMode.
//
// Where rows live: a Store holds every row of a table. What a store can
// do beyond reading and writing rows it says by the methods it has, found
// by assertion: a Stepper steps its own rows by a Rule (the store of a
// shared table, which several workers step in place), a GroupStepper
// steps several of its tables in one round trip.
//
// How rows are stepped: a Rule (optim.SparseAdam, optim.RowWiseAdagrad,
// ...) is a name, the state each row carries (Columns) and a Go function
// that updates rows where they are held (StepRows), given a RowGrad, the
// gradient of the rows a batch touched. A rule keeps no state: the table
// keeps it, in its Columns and one step count. A store whose rows are
// updated on its own servers (a Redis Cluster) cannot run a Go function
// there: it runs its own encoding of each rule, registered under the
// rule's Name (cluster.RegisterRule; optim/clusterlua registers optim's
// by a blank import), and refuses a rule it has none for with an error
// naming both. A rule written outside this module runs the checks the
// module's own rules run (CheckRates, CheckRows in StepRows, CheckGrad in
// Check, CheckFinite), so that it refuses what they refuse, with the same
// errors (ExampleRule).
//
// Raw ids: an id map (a Mapper) gives raw 64-bit ids the rows of a
// table as they come, under IDMapOptions, and says which rows it gave
// (Assignment), which start as a RowInit says. A StoreMapper lives beside
// its store's rows and starts them there.
//
// What a server is sent: a Delta, the rows training changed since the
// last one.
//
// The words, one per concept:
//   - the cache: table.Cached, the rows of a table in memory in front of
//     its Store, stepped there and written back;
//   - the shared store: a Store that steps its own rows (a Stepper),
//     which a cache with CacheOptions.Shared steps in place so that
//     several workers train one table;
//   - the id map: a Mapper (table.IDMap in memory, cluster.IDMap on a
//     Redis Cluster);
//   - the step: one update of a table's rows by a Rule, counted by the
//     table (Stepper.Steps).
//
// Row ids are int64 everywhere: in a RowGrad, in a store, in a cache.
// The errors about a file or a store's contents wrap ErrFormat or
// ErrMismatch.
package driver
