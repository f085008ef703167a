// Package clusterlua registers the Lua encodings of package optim's
// sparse optimisers (SparseSGD, SparseAdam, RowWiseAdagrad,
// SparseAdagrad) with package cluster, so that a cluster.Store steps
// their rows on its servers. A program imports it for that effect, as
// it imports image/png to decode PNG:
//
//	import _ "github.com/gathergrad/gather/optim/clusterlua"
//
// Each file lua/<name>.lua is the rule of that Name, written to the
// same bits on float32 rows as its Go kernel; a user's rule registers
// its own with cluster.RegisterRule the same way.
package clusterlua

import (
	"embed"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/optim"
)

//go:embed lua/*.lua
var files embed.FS

func init() {
	for _, r := range []driver.Rule{&optim.SparseSGD{}, &optim.SparseAdam{}, &optim.RowWiseAdagrad{}, &optim.SparseAdagrad{}} {
		lua, err := files.ReadFile("lua/" + r.Name() + ".lua")
		if err != nil {
			panic("clusterlua: " + err.Error()) // the embedded files are the package's own
		}
		if err := cluster.RegisterRule(r, cluster.Encoding{Lua: string(lua)}); err != nil {
			panic("clusterlua: " + err.Error()) // registered first, under optim's names
		}
	}
}
