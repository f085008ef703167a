// Package live holds the parts of a server that answers requests with a
// model that keeps changing, whatever the model: a Holder of the current
// model, loaded again from its file on Reload (on a signal, or when a
// watch finds the file changed) beside the model answering, each answer
// naming the version it came from; a Gate that admits as many requests
// as there are workers and a queue more, and refuses the rest at once
// (answer them 503 with Retry-After), a second queue more while the
// Holder is Busy loading or updating a model (ExtendWhile), so that the
// processor time a reload takes does not turn requests away; and Metrics,
// in Prometheus's text format. examples/serve builds its click-model
// server from them.
//
//	h, _ := live.NewHolder(path, loadModel)
//	gate := live.NewGate(0, 0)
//	gate.ExtendWhile(h.Busy)
//	http.HandleFunc("/predict", func(w http.ResponseWriter, r *http.Request) {
//		leave, err := gate.Enter(r.Context())
//		if errors.Is(err, live.ErrFull) { ... answer 503 ... }
//		if err != nil { return } // the client left while it waited
//		defer leave()
//		m := h.Current() // answer with m.Model, name m.Version
//	})
//	go h.Watch(ctx, hup, time.Tick(time.Second), log.Printf)
package live
