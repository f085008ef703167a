// Package cluster keeps embedding tables on a Redis Cluster, for several
// workers that train one table at once: Store holds a table's rows on
// the cluster (Create writes one, Open opens it) and steps them on its
// servers, each row's update atomic and applied exactly once by the
// rule's Lua encoding (RegisterRule; optim's sparse optimisers register
// theirs when a program imports optim/clusterlua); IDMap maps raw ids to the table's rows on the
// cluster, beside them, shared by every worker.
//
// A Store is a driver.Store: put a table.Cached with
// table.CacheOptions.Shared in front of it and train it with
// nn.CachedEmbedding, and give nn.NewRawIDs its IDMap for raw ids. It
// also keeps the workers' clocks for optim.SharedDense, and carries a
// table's deltas to servers (PublishDelta, ReadDelta: a key a delta, kept
// for a while, in the order a server applies them). What the cache
// finds in it beyond its rows it finds by assertion: it steps its own
// rows (driver.Stepper); its IDMap starts the rows it gives and says which
// it read (driver.StoreMapper's MapRead).
//
// A Redis Cluster on several machines: start each redis-server with
// cluster-enabled yes, requirepass and masterauth (one password), join
// them with redis-cli -a <password> --cluster create host:port...
// --cluster-replicas 1, and give the workers some of the addresses
// (Options.Addrs); SetLog shows go-redis's messages and Options.TLS
// takes a tls.Config. A row of 64 float32 and an Adagrad sum takes about
// 413 bytes in Redis; add workers until the masters' CPU is the limit,
// then masters. StartLocal starts a cluster of local servers, for a
// test or an example on one machine.
//
// Errors wrap the sentinels of package gather (gather.ErrShape, ...),
// checkpoint.ErrMismatch for a table or map not as asked,
// checkpoint.ErrFormat for a record that is not one, driver.ErrClosed,
// or this package's ErrUnknownOutcome (a server-side step or map that
// may have been applied in part: make it again), ErrFewReplicas and
// ErrNoDelta.
package cluster
