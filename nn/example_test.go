package nn_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
)

// counting fills a table with 0, 1, 2, ... so that the rows can be read.
func counting(dt tensor.Dtype, s ...int) any {
	v := make([]float32, tensor.Shape(s).TotalSize())
	for i := range v {
		v[i] = float32(i)
	}
	return v
}

func ExampleNewEmbedding() {
	g := gorgonia.NewGraph()
	emb, err := nn.NewEmbedding(g, "words", 4, 3, tensor.Float32,
		nn.WithInit(counting), nn.WithPadding(0))
	if err != nil {
		log.Fatal(err)
	}
	ids := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int{1, 3, 0, 1}))))
	vecs, err := emb.Lookup(ids) // [2, 2] ids -> [2, 2, 3] vectors
	if err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(vecs.Shape(), vecs.Value().Data()) // id 0 is padding: its row is zeros
	// Output:
	// (2, 2, 3) [3 4 5 9 10 11 0 0 0 3 4 5]
}

// A row-sparse embedding trained with optim.SparseAdam: the dense solver updates
// the rest of the model, the table moves only in the rows a batch names.
func ExampleWithSparse() {
	g := gorgonia.NewGraph()
	emb, err := nn.NewEmbedding(g, "words", 1000, 4, tensor.Float32,
		nn.WithInit(counting), nn.WithSparse())
	if err != nil {
		log.Fatal(err)
	}
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{7, 3, 7}))))
	targets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 1, 0}))))
	w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 2), gorgonia.WithName("w"),
		gorgonia.WithInit(gorgonia.Zeroes()))
	h, err := emb.Lookup(ids)
	if err != nil {
		log.Fatal(err)
	}
	loss, err := nn.CrossEntropy(gorgonia.Must(gorgonia.Mul(h, w)), targets)
	if err != nil {
		log.Fatal(err)
	}
	dense := gorgonia.Nodes{w}
	if _, err := gorgonia.Grad(loss, append(dense, emb.GradNodes()...)...); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g, machine.WithGrads(dense...))
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	solver := gorgonia.NewAdamSolver(gorgonia.WithLearnRate(0.01))
	adam := optim.NewSparseAdam(0.01)
	table := emb.Table.Value().(*tensor.Dense)
	row := func(r int) []float32 { return table.Float32s()[r*4 : (r+1)*4] }
	for range 3 {
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		// The table: only the rows this run touched (3 and 7) move.
		if err := emb.Step(context.Background(), adam); err != nil {
			log.Fatal(err)
		}
		// The rest of the model.
		if err := solver.Step(gorgonia.NodesToValueGrads(dense)); err != nil {
			log.Fatal(err)
		}
		vm.Reset()
	}
	fmt.Println("row 5 unchanged:", row(5))
	fmt.Println("row 7 moved:", row(7)[0] != 28)
	// Output:
	// row 5 unchanged: [20 21 22 23]
	// row 7 moved: true
}

// RowGrad is the table's gradient as the rows a run touched; Step is
// RowGrad followed by an optimiser's Step.
func ExampleEmbedding_RowGrad() {
	g := gorgonia.NewGraph()
	emb, err := nn.NewEmbedding(g, "words", 1000, 2, tensor.Float64, nn.WithSparse())
	if err != nil {
		log.Fatal(err)
	}
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{7, 3, 7}))))
	h, err := emb.Lookup(ids)
	if err != nil {
		log.Fatal(err)
	}
	cost := gorgonia.Must(gorgonia.Sum(h))
	if _, err := gorgonia.Grad(cost, emb.GradNodes()...); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	rg, err := emb.RowGrad()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rg.Rows, rg.Values.Data()) // id 7 was looked up twice
	// Output:
	// [3 7] [1 1 2 2]
}

func ExampleCrossEntropy() {
	g := gorgonia.NewGraph()
	logits := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("logits"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{
			2, 0, 0,
			0, 0, 0,
		}))))
	targets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 2}))))
	loss, err := nn.CrossEntropy(logits, targets)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, logits); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	grad, _ := logits.Grad()
	fmt.Printf("loss %.4f\n", loss.Value().Data()) // (-log(e²/(e²+2)) + log 3) / 2
	fmt.Printf("grad %.4f\n", grad.Data())
	// Output:
	// loss 0.6691
	// grad [-0.1065 0.0533 0.0533 0.1667 0.1667 -0.3333]
}

func ExampleNLLLoss() {
	g := gorgonia.NewGraph()
	logProbs := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("logp"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{
			-0.1, -2.3,
			-1.2, -0.4,
		}))))
	targets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 1}))))
	loss, err := nn.NLLLoss(logProbs, targets)
	if err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.2f\n", loss.Value().Data()) // -(-0.1 + -0.4) / 2
	// Output:
	// 0.25
}

// LogSoftmax then NLLLoss, as PyTorch users often write CrossEntropy.
func ExampleLogSoftmax() {
	g := gorgonia.NewGraph()
	logits := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("logits"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{
			2, 0, 0,
			0, 0, 0,
		}))))
	targets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 2}))))
	logp, err := nn.LogSoftmax(logits, -1)
	if err != nil {
		log.Fatal(err)
	}
	loss, err := nn.NLLLoss(logp, targets)
	if err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("log-probabilities %.4f\n", logp.Value().Data())
	fmt.Printf("loss %.4f\n", loss.Value().Data()) // as ExampleCrossEntropy's
	// Output:
	// log-probabilities [-0.2395 -2.2395 -2.2395 -1.0986 -1.0986 -1.0986]
	// loss 0.6691
}

// Pooled bags and a dense feature joined before a model's top layers.
func ExampleConcat() {
	g := gorgonia.NewGraph()
	bag := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("bag"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4}))))
	dense := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("dense"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float64{5, 6}))))
	z, err := nn.Concat(1, bag, dense)
	if err != nil {
		log.Fatal(err)
	}
	var zv gorgonia.Value
	gorgonia.Read(z, &zv) // the machine may reuse z's memory for the gradients
	cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Square(z))))
	if _, err := gorgonia.Grad(cost, bag, dense); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	gd, _ := dense.Grad()
	fmt.Println(zv.Shape(), zv.Data())
	fmt.Println(gd.Data()) // 2·dense
	// Output:
	// (2, 3) [1 2 5 3 4 6]
	// [10 12]
}

// A layer as torch.nn.Linear(2, 1) computes it, its weight [out, in].
func ExampleLinear() {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("x"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4}))))
	w := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("weight"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{0.5, -1}))))
	b := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithName("bias"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking([]float64{10}))))
	y, err := nn.Linear(x, w, b)
	if err != nil {
		log.Fatal(err)
	}
	var yv gorgonia.Value
	gorgonia.Read(y, &yv)
	if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(y)), w, b); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	gw, _ := w.Grad()
	gb, _ := b.Grad()
	fmt.Println(yv.Data(), gw.Data(), gb.Data())
	// Output:
	// [8.5 7.5] [4 6] [2]
}

func ExampleEmbeddingBag() {
	g := gorgonia.NewGraph()
	table := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("table"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float64{
			0, 0, // row 0: padding
			1, 2, // row 1
			3, 4, // row 2
			5, 6, // row 3
		}))))
	// Three bags in one vector of ids: [1 2 0], [3], [] (offsets 0, 3, 4).
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{1, 2, 0, 3}))))
	offsets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("offsets"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 3, 4}))))
	weights := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithName("weights"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]float64{1, 0.5, 7, 2}))))

	mean, err := nn.EmbeddingBag(table, ids, offsets, weights, nn.BagMean, nn.WithPadding(0))
	if err != nil {
		log.Fatal(err)
	}
	peak, err := nn.EmbeddingBag(table, ids, offsets, nil, nn.BagMax)
	if err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("weighted mean:", mean.Value().Data()) // (1·[1 2] + 0.5·[3 4]) / 2; 2·[5 6]; zeros
	fmt.Println("max:", peak.Value().Data())
	// Output:
	// weighted mean: [1.25 2 10 12 0 0]
	// max: [3 4 5 6 0 0]
}

// Batches of bags whose total length changes from batch to batch, fed to
// one graph of fixed shape: PackBags writes each batch into the ids and
// offsets the graph holds, filling the room left with the padding id, which
// the bag skips.
func ExamplePackBags() {
	const vocab, capacity, bags = 6, 8, 3
	pad := vocab // a row of its own, after the real ids
	g := gorgonia.NewGraph()
	emb, err := nn.NewEmbedding(g, "words", vocab+1, 2, tensor.Float64,
		nn.WithSeed(1), nn.WithPadding(pad))
	if err != nil {
		log.Fatal(err)
	}
	ids := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(capacity))
	offsets := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(bags))
	idsN := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(ids))
	offN := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("offsets"), gorgonia.WithValue(offsets))
	y := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(bags))
	yN := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"), gorgonia.WithValue(y))
	pooled, err := emb.Bag(idsN, offN, nil, nn.BagMean) // [3, 2]: two classes
	if err != nil {
		log.Fatal(err)
	}
	loss, err := nn.CrossEntropy(pooled, yN)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, emb.Learnables()...); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g, machine.WithGrads(emb.Learnables()...))
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	solver := gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.5))

	batches := []struct {
		bags   [][]int
		labels []int
	}{
		{[][]int{{0, 1}, {2, 3, 4}, {5}}, []int{0, 1, 1}},         // 6 ids
		{[][]int{{0}, {}, {3, 4, 5, 1, 2, 0, 1}}, []int{0, 1, 0}}, // 8 ids, an empty bag
		{[][]int{{1, 1}, {4}, {2}}, []int{0, 1, 1}},               // 4 ids
	}
	for epoch := range 2 {
		for _, b := range batches {
			if err := nn.PackBags(ids, offsets, b.bags, pad); err != nil {
				log.Fatal(err)
			}
			copy(y.Ints(), b.labels)
			if err := vm.RunAll(); err != nil {
				log.Fatal(err)
			}
			if epoch == 1 {
				fmt.Printf("%d ids: loss %.4f\n", len(slices.Concat(b.bags...)), loss.Value().Data())
			}
			if err := solver.Step(gorgonia.NodesToValueGrads(emb.Learnables())); err != nil {
				log.Fatal(err)
			}
			vm.Reset()
		}
	}
	table := emb.Table.Value().(*tensor.Dense).Float64s()
	fmt.Println("padding row:", table[pad*2:])
	// Output:
	// 6 ids: loss 0.4617
	// 8 ids: loss 0.9154
	// 4 ids: loss 0.6489
	// padding row: [0 0]
}

// Evaluation runs the forward pass of a trained model alone: a machine on
// the subgraph that computes the output, made without BindDualValues and
// followed by no solver or Step, computes no gradient and changes no value.
func Example_evaluation() {
	g := gorgonia.NewGraph()
	emb, err := nn.NewEmbedding(g, "words", 5, 2, tensor.Float64, nn.WithSeed(3))
	if err != nil {
		log.Fatal(err)
	}
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 1, 2, 3}))))
	y := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 1, 1, 0}))))
	scores, err := emb.Lookup(ids) // [4, 2]: the rows are the scores of two classes
	if err != nil {
		log.Fatal(err)
	}
	loss, err := nn.CrossEntropy(scores, y)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, emb.Learnables()...); err != nil {
		log.Fatal(err)
	}

	// Training: the whole graph, gradients bound to the learnables.
	train, err := machine.New(g, machine.WithGrads(emb.Learnables()...))
	if err != nil {
		log.Fatal(err)
	}
	defer train.Close()
	solver := gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(1))
	for range 20 {
		if err := train.RunAll(); err != nil {
			log.Fatal(err)
		}
		if err := solver.Step(gorgonia.NodesToValueGrads(emb.Learnables())); err != nil {
			log.Fatal(err)
		}
		train.Reset()
	}

	// Evaluation: only the nodes scores needs, on new ids.
	eval, err := machine.New(g.SubgraphRoots(scores))
	if err != nil {
		log.Fatal(err)
	}
	defer eval.Close()
	if err := gorgonia.Let(ids, tensor.New(tensor.WithBacking([]int{2, 2, 0, 3}))); err != nil {
		log.Fatal(err)
	}
	before := slices.Clone(emb.Table.Value().(*tensor.Dense).Float64s())
	if err := eval.RunAll(); err != nil {
		log.Fatal(err)
	}
	s := scores.Value().(*tensor.Dense).Float64s()
	var classes []int
	for i := range 4 {
		class := 0
		if s[2*i+1] > s[2*i] {
			class = 1
		}
		classes = append(classes, class)
	}
	fmt.Println("classes:", classes)
	fmt.Println("table unchanged:", slices.Equal(before, emb.Table.Value().(*tensor.Dense).Float64s()))
	// Output:
	// classes: [1 1 0 0]
	// table unchanged: true
}

// A click model's loss: one logit per example and label, soft labels
// allowed, positives weighed up (PyTorch's pos_weight).
func ExampleBCEWithLogits() {
	g := gorgonia.NewGraph()
	logits := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("logits"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{2, -1, 0, 1e4}))))
	labels := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("labels"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 0, 0.5, 1}))))
	mean, err := nn.BCEWithLogits(logits, labels)
	if err != nil {
		log.Fatal(err)
	}
	each, err := nn.BCEWithLogits(logits, labels, nn.WithReduction(nn.ReduceNone),
		nn.WithPosWeight(tensor.New(tensor.WithBacking([]float64{3, 1}))))
	if err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("mean: %.4f\n", mean.Value().Data())
	fmt.Printf("each, positives of column 0 weighed 3: %.4f\n", each.Value().Data())
	// Output:
	// mean: 0.2833
	// each, positives of column 0 weighed 3: [0.3808 0.3133 1.3863 0.0000]
}

// Padded sequences: the padding targets (-100 here, PyTorch's default)
// are left out of the loss and of the mean's count.
func ExampleWithIgnoreIndex() {
	g := gorgonia.NewGraph()
	logits := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("logits"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{2, 0, 0, 2, 5, -5}))))
	targets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("targets"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 1, -100}))))
	loss, err := nn.CrossEntropy(logits, targets, nn.WithIgnoreIndex(-100))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, logits); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	grad, _ := logits.Grad()
	fmt.Printf("loss: %.4f\n", loss.Value().Data())
	fmt.Printf("gradient: %.4f\n", grad.Data())
	// Output:
	// loss: 0.1269
	// gradient: [-0.0596 0.0596 0.0596 -0.0596 0.0000 0.0000]
}

// What a table can do beyond lookups and steps depends on where its rows
// live, and its Home says so by the interfaces it has: a table in memory
// holds its weights (nn.Weights, an optim.Param for optim.State) and has
// nothing to sync; a table in a file (OpenEmbedding) syncs too, and a
// cached one (CachedEmbedding) is an nn.Cache.
func ExampleEmbedding_Home() {
	emb, err := nn.NewEmbedding(gorgonia.NewGraph(), "items", 5, 3, tensor.Float32, nn.WithSparse())
	if err != nil {
		log.Fatal(err)
	}
	if w, ok := emb.Home().(nn.Weights); ok {
		t, _ := w.Weight()
		fmt.Println("weights:", t.Shape())
		state, err := optim.State(w, optim.NewSparseAdam(0.01)).State()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("adam's state:", len(state), "tensors")
	}
	_, syncs := emb.Home().(nn.Syncer)
	_, cached := emb.Home().(nn.Cache)
	fmt.Println("syncs:", syncs, "cached:", cached)
	// Output:
	// weights: (5, 3)
	// adam's state: 3 tensors
	// syncs: false cached: false
}
