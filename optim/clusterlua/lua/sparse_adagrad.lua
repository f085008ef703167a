-- SparseAdagrad on one float32 row, its sums s = w[dim + j] after its
-- values: s += g*g, w += -clr * g / (sqrt(s) + eps), each operation
-- rounded to float32 as the Go kernel rounds it. p: -clr, eps, as
-- float32 values.
return function(w, g, p, dim, f)
  local nclr, eps = p[1], p[2]
  for j = 1, dim do
    local x = g[j]
    local s = f(w[dim + j] + f(x * x))
    w[dim + j] = s
    w[j] = f(w[j] + f(nclr * f(x / f(f(math.sqrt(s)) + eps))))
  end
end
